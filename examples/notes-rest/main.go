// Command notes-rest is the runnable backend of the local-rest example in
// examples/extensions: a small HTTP notes service on loopback, in the
// spirit of Obsidian's Local REST API, that wants a bearer token.
//
//	GET /search/simple?query=…   notes whose text contains query
//	GET /notes/{path}            one note
//
// The token is read from the file named by $NOTES_TOKEN_FILE (the same file
// `plexus secrets set notes-api-key` writes under PLEXUS_HOME/secrets/ will
// do, or any file). The folder is $NOTES_DIR (default ~/notes); the port
// $NOTES_PORT (default 27123).
//
//	go run ./examples/notes-rest
package main

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	dir := os.Getenv("NOTES_DIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			log.Fatal(err)
		}
		dir = filepath.Join(home, "notes")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		log.Fatalf("notes folder: %v", err)
	}
	tokenFile := os.Getenv("NOTES_TOKEN_FILE")
	if tokenFile == "" {
		log.Fatal("set NOTES_TOKEN_FILE to the file holding the API token")
	}
	tb, err := os.ReadFile(tokenFile)
	if err != nil {
		log.Fatalf("token: %v", err)
	}
	token := strings.TrimSpace(string(tb))
	port := os.Getenv("NOTES_PORT")
	if port == "" {
		port = "27123"
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /search/simple", func(w http.ResponseWriter, r *http.Request) {
		q := strings.ToLower(r.URL.Query().Get("query"))
		var hits []map[string]string
		_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
				return err
			}
			b, err := root.ReadFile(p)
			if err == nil && strings.Contains(strings.ToLower(string(b)), q) {
				hits = append(hits, map[string]string{"path": p, "text": string(b)})
			}
			return nil
		})
		writeJSON(w, http.StatusOK, map[string]any{"query": q, "results": hits})
	})
	mux.HandleFunc("GET /notes/{path...}", func(w http.ResponseWriter, r *http.Request) {
		b, err := root.ReadFile(r.PathValue("path"))
		if errors.Is(err, fs.ErrNotExist) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such note"})
			return
		} else if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"path": r.PathValue("path"), "text": string(b)})
	})
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong bearer token"})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	srv := &http.Server{Addr: net.JoinHostPort("127.0.0.1", port), Handler: auth(mux), ReadHeaderTimeout: 5 * time.Second}
	log.Printf("notes-rest: serving %s on http://%s", dir, srv.Addr)
	log.Fatal(srv.ListenAndServe())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
