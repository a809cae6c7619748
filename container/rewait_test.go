package container

import (
	"net/http"
	"strings"
	"testing"

	"github.com/docker/docker/client"
)

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// watchedWaits is a Docker on the rig's engine whose client reports on the
// returned channel each container wait the engine has answered the
// headers of: the engine sends them once the wait is registered, so a
// test can make the container exit only after that.
func (e *rig) watchedWaits(t *testing.T) (*Docker, <-chan struct{}) {
	t.Helper()
	hc := e.cli.HTTPClient()
	inner := hc.Transport
	waits := make(chan struct{}, 16)
	hc.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := inner.RoundTrip(r)
		if err == nil && strings.HasSuffix(r.URL.Path, "/wait") {
			select {
			case waits <- struct{}{}:
			default:
			}
		}
		return resp, err
	})
	cli, err := client.NewClientWithOpts(client.WithHost(e.cli.DaemonHost()), client.WithHTTPClient(hc), client.WithVersion(e.cli.ClientVersion()))
	if err != nil {
		t.Fatal(err)
	}
	return newDocker(cli, WithLogger(e.d.log)), waits
}
