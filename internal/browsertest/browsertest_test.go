package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
