// Package plexus holds the domain and wire types of the Plexus protocol
// (specs/plexus-protocol-m0.txt) and the few small interfaces that several
// packages meet at: [Source], [Transport] and [Authorizer].
//
// It depends on the standard library only. It must never import another
// package of this module: every other package points down to this one.
package plexus

// ProtocolFamily is the protocol family the wire advertises ("0.1"); a 0.1.x
// client interoperates across patch bumps.
const ProtocolFamily = "0.1"

// ProtocolVersion is the exact contract revision implemented.
const ProtocolVersion = "0.1.3"

// Version is the gateway implementation version.
const Version = "0.1.0"
