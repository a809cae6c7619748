package daemon_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/daemon/daemontest"
)

// FuzzRequestBodies posts arbitrary bodies to every JSON route: the server
// must never panic, answer 200 or a 4xx with a JSON error naming a code (the
// fake never fails), and pass only checked requests on.
func FuzzRequestBodies(f *testing.F) {
	f.Add(0, []byte(`{"repoPath":"/tmp","taskFiles":[".aimi/tasks/a-tasks.json"],"max":2}`))
	f.Add(0, []byte(`{"repoPath":"/tmp","taskFiles":[""],"append":true,"force":true}`))
	f.Add(1, []byte(`{"repoPath":"/tmp","names":["aimi-a",""]}`))
	f.Add(2, []byte(`{"repoPath":"relative","retryFailed":true}`))
	f.Add(3, []byte(`{"repoPath":"/tmp","force":true}{}`))
	f.Add(0, []byte(`{"repoPath":"/tmp","taskFiles":null,"max":-1}`))
	f.Add(0, []byte("\xff\xfe"))
	routes := []string{"/v1/swarms/start", "/v1/swarms/stop", "/v1/swarms/resume", "/v1/swarms/cleanup"}
	fake := &daemontest.Swarms{}
	srv := daemon.NewServer(daemon.ServerOptions{Swarms: fake, Logger: slogTo(&bytes.Buffer{})})
	f.Fuzz(func(t *testing.T, route int, body []byte) {
		if route < 0 {
			route = -route
		}
		path := routes[route%len(routes)]
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		if rec.Code == http.StatusOK {
			return
		}
		if rec.Code < 400 || rec.Code >= 500 {
			t.Fatalf("%s %q: HTTP %d", path, body, rec.Code)
		}
		var eb api.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Code == "" || eb.Error == "" {
			t.Fatalf("%s %q: error body %q", path, body, rec.Body.String())
		}
	})
}
