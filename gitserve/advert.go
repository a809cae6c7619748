package gitserve

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// A clone over protocol v2 (what git asks for) begins with GET
// info/refs?service=git-upload-pack, whose answer names no ref: it is
// upload-pack's capability list, fixed by the git binary and the mirror's
// config. Asking git each time costs a nice, a git http-backend and a
// git-upload-pack, a third of a clone's processes on the daemon's host,
// which a fan-out of claimed sandboxes pays all at once. advertCache
// keeps the first answer per mirror and Git-Protocol value and serves it
// again while the mirror's config and the git binary are unchanged;
// every other request (ref lists, packs, pushes, protocol v0) still goes
// to git.
type advertCache struct {
	mu      sync.Mutex
	entries map[advertKey]advert
}

// advertKey is a mirror, the git http-backend serving it and the client's
// Git-Protocol header.
type advertKey struct{ mirror, backend, protocol string }

// advert is one recorded answer and the mirror config it was made under.
type advert struct {
	header http.Header
	body   []byte
	config configStamp
}

// configStamp tells a mirror's config file apart from a rewritten one
// (git config writes a new file and renames it into place), and the git
// binary from an upgraded one.
type configStamp struct {
	mod, binMod time.Time
	size        int64
}

// maxAdvert bounds a recorded answer: a capability list is a few hundred
// bytes, and anything longer is not one.
const maxAdvert = 4096

// v2Advert is how a protocol v2 capability advertisement begins (pkt-line
// "version 2\n"); an answer without it (a ref advertisement) is not kept.
var v2Advert = []byte("000eversion 2\n")

func stampOf(mirror, backend string) (configStamp, bool) {
	fi, err := os.Stat(filepath.Join(mirror, "config"))
	if err != nil {
		return configStamp{}, false
	}
	bin, err := os.Stat(backend)
	if err != nil {
		return configStamp{}, false
	}
	return configStamp{mod: fi.ModTime(), size: fi.Size(), binMod: bin.ModTime()}, true
}

// gitV2 is the Git-Protocol header git sends for protocol v2. Only that
// exact value is kept: the header comes from the sandbox, and a key per
// value it makes up would let it grow the cache without end.
const gitV2 = "version=2"

// cachable: a GET of upload-pack's info/refs asking for protocol v2 as
// git does.
func cachable(r *http.Request, rest, service string) (protocol string, ok bool) {
	protocol = r.Header.Get("Git-Protocol")
	return protocol, r.Method == http.MethodGet && rest == "info/refs" && service == "git-upload-pack" && protocol == gitV2
}

// serve answers from the cache; false when it holds nothing current.
func (c *advertCache) serve(w http.ResponseWriter, k advertKey) bool {
	stamp, ok := stampOf(k.mirror, k.backend)
	if !ok {
		return false
	}
	c.mu.Lock()
	a, ok := c.entries[k]
	c.mu.Unlock()
	if !ok || a.config != stamp {
		return false
	}
	for name, vs := range a.header {
		w.Header()[name] = vs
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(a.body)
	return true
}

// recorder passes git http-backend's answer on and keeps a copy of it.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	over   bool
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len()+len(p) > maxAdvert {
		r.over = true
	} else {
		r.body.Write(p)
	}
	return r.ResponseWriter.Write(p)
}

// keep stores what rec saw, if it is a whole v2 capability list answered
// under the config stamp taken before the request (a config rewritten
// meanwhile leaves nothing kept).
func (c *advertCache) keep(k advertKey, before configStamp, rec *recorder) {
	body := rec.body.Bytes()
	if rec.status != http.StatusOK || rec.over || !bytes.HasPrefix(body, v2Advert) || !bytes.HasSuffix(body, []byte("0000")) {
		return
	}
	if now, ok := stampOf(k.mirror, k.backend); !ok || now != before {
		return
	}
	h := rec.Header().Clone()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[advertKey]advert{}
	}
	c.entries[k] = advert{header: h, body: bytes.Clone(body), config: before}
}

// forget drops the answers kept for mirror.
func (c *advertCache) forget(mirror string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if k.mirror == mirror {
			delete(c.entries, k)
		}
	}
}
