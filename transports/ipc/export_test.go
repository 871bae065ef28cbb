package ipc

// Only the tests list every message type: the server dispatches on each
// constant by name, so the list lives beside the test that holds it to §4.

// Types returns the message types of §4, in the spec's order.
func Types() []string {
	return []string{
		TypeAgentHello, TypeCoreWelcome, TypeCoreGoodbye,
		TypeAgentToolsRegister, TypeCoreToolsRegistered,
		TypeAgentToolsUnregister, TypeCoreToolsUnregistered,
		TypeCoreToolCall, TypeAgentToolStream, TypeAgentToolResult,
		TypeCoreToolCancel, TypeAgentToolCancelAck,
		TypeAgentHeartbeat, TypeCorePing, TypeAgentPong,
	}
}
