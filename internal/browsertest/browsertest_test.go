package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aimi-tools/swarm/internal/dockertest"
)

func TestBrowserLoadsLoopbackPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>t</title><p id="x">hello</p><script>document.getElementById('x').textContent='from js'</script>`)
	}))
	defer srv.Close()
	actx, _ := Start(t)
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel2 := context.WithTimeout(ctx, 30*time.Second)
	defer cancel2()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL)); err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#x")))
	if err != nil {
		t.Fatal(err)
	}
	if text != "from js" {
		t.Fatalf("text %q", text)
	}
}

// TestBrowserOutweighsSandboxes: the browser's container weighs as much as
// a few hundred default containers in the engine's CPU group, so a page
// under test keeps reading its streams while hundreds of sandboxes are
// busy at once (BenchmarkScale's stop of all of them). With the default
// weight it was one peer among them and stalled for seconds.
func TestBrowserOutweighsSandboxes(t *testing.T) {
	_, b := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := dockertest.Client(t).ContainerInspect(ctx, b.Container)
	if err != nil {
		t.Fatal(err)
	}
	const defaultShares, sandboxes = 1024, 256
	if got := info.HostConfig.CPUShares; got < defaultShares*sandboxes {
		t.Fatalf("the browser's container has CPU shares %d; want at least %d (%d default containers)", got, defaultShares*sandboxes, sandboxes)
	}
}
