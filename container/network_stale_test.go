package container

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/contract"
)

// staleEngine fakes the few Engine API calls RemoveNetworkIfUnused makes,
// with the state engine 20.10 sometimes leaves behind: a network that no
// container refers to but that still lists an endpoint of a removed
// container. The real engine cannot be made to do that on demand (it is a
// race in its removal path), so this is the unit test of the recovery; the
// fifty-container engine test checks the same outcome on the real engine.
type staleEngine struct {
	mu           sync.Mutex
	endpoints    map[string]string // container id or ep-<id> -> endpoint name
	live         map[string]bool   // container ids the engine still knows
	disconnected []string
	removed      bool
}

func (f *staleEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	path := r.URL.Path
	if i := strings.Index(path[1:], "/"); strings.HasPrefix(path, "/v1.") && i > 0 {
		path = path[i+1:]
	}
	notFound := func() {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "No such object"})
	}
	switch {
	case r.Method == http.MethodGet && path == "/containers/json":
		_, _ = w.Write([]byte("[]")) // nothing refers to the network
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/containers/"):
		id := strings.TrimSuffix(strings.TrimPrefix(path, "/containers/"), "/json")
		if !f.live[id] {
			notFound()
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"Id": id, "Name": "/" + f.endpoints[id]})
	case r.Method == http.MethodDelete && path == "/networks/aimi-swarm-net":
		if len(f.endpoints) > 0 {
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]string{"message": "error while removing network: network aimi-swarm-net id n1 has active endpoints"})
			return
		}
		f.removed = true
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && path == "/networks/aimi-swarm-net":
		cs := map[string]any{}
		for id, name := range f.endpoints {
			cs[id] = map[string]string{"Name": name}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"Id": "n1", "Name": "aimi-swarm-net", "Containers": cs, "Labels": map[string]string{contract.LabelSandbox: "true"}})
	case r.Method == http.MethodPost && path == "/networks/n1/disconnect":
		var body struct {
			Container string
			Force     bool
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if !body.Force {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.disconnected = append(f.disconnected, body.Container)
		for id, name := range f.endpoints {
			if name == body.Container {
				delete(f.endpoints, id)
			}
		}
	default:
		http.Error(w, "unexpected call "+r.Method+" "+r.URL.Path, http.StatusNotImplemented)
	}
}

func removeOnFakeEngine(t *testing.T, f *staleEngine) error {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cli, err := client.NewClientWithOpts(client.WithHost("tcp://"+strings.TrimPrefix(srv.URL, "http://")), client.WithVersion("1.41"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	d := newDocker(cli, WithLogger(slog.New(slog.DiscardHandler)))
	return d.RemoveNetworkIfUnused(context.Background(), "aimi-swarm-net")
}

func TestRemoveNetworkIfUnusedClearsTheStaleEndpointOfARemovedContainer(t *testing.T) {
	f := &staleEngine{endpoints: map[string]string{"ep-3f2a": "aimi-gone"}, live: map[string]bool{}}
	if err := removeOnFakeEngine(t, f); err != nil {
		t.Fatalf("RemoveNetworkIfUnused = %v, want nil", err)
	}
	if !f.removed {
		t.Fatal("network kept although its only endpoint belonged to a removed container")
	}
	if len(f.disconnected) != 1 || f.disconnected[0] != "aimi-gone" {
		t.Fatalf("forced disconnects %v, want [aimi-gone]", f.disconnected)
	}
}

func TestRemoveNetworkIfUnusedLeavesTheEndpointOfALiveContainer(t *testing.T) {
	// A container that joined after the "anyone using it?" list: its
	// endpoint is real, so the network stays and nothing is disconnected.
	f := &staleEngine{endpoints: map[string]string{"c0ffee": "aimi-joined"}, live: map[string]bool{"c0ffee": true}}
	if err := removeOnFakeEngine(t, f); err != nil {
		t.Fatalf("RemoveNetworkIfUnused = %v, want nil (a network in use is kept, not an error)", err)
	}
	if f.removed || len(f.disconnected) != 0 {
		t.Fatalf("removed=%v disconnected=%v, want the network and its live endpoint untouched", f.removed, f.disconnected)
	}
}
