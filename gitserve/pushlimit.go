package gitserve

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Config keys the refusals name: the user raises the limit there.
const (
	KeyMaxPush   = "git.max_push"
	KeyMaxMirror = "git.max_mirror"
)

const (
	spoolDir = "spool"
	// baseName, in a mirror, holds its size made of the user's own
	// history (at its clone and its refreshes): what the swarm's pushes
	// added is the mirror's size minus it.
	baseName = "aimi-base-bytes"
)

var errOverLimit = errors.New("over the limit")

// spool copies r into an unlinked file of the service's spool directory
// (nothing is left behind by a crash), at most limit bytes: more is
// errOverLimit. The file is rewound for git to read; the caller closes it.
func (s *Service) spool(r io.Reader, limit int64) (*os.File, int64, error) {
	f, err := os.CreateTemp(filepath.Join(s.dir, spoolDir), "body-")
	if err != nil {
		return nil, 0, fmt.Errorf("spool a request body: %w", err)
	}
	os.Remove(f.Name())
	n, err := io.Copy(f, io.LimitReader(r, limit+1))
	switch {
	case err != nil:
		f.Close()
		return nil, n, err
	case n > limit:
		f.Close()
		return nil, n, errOverLimit
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, n, fmt.Errorf("spool a request body: %w", err)
	}
	return f, n, nil
}

// useSpooled makes f (n bytes, as git must read them) r's body: git
// http-backend gets the file itself as its input and the length.
func useSpooled(r *http.Request, f *os.File, n int64) {
	r.Body = f
	r.ContentLength = n
	r.TransferEncoding = nil
	r.Header.Del("Content-Encoding")
}

// admitPush spools a push (cmds already read, body the rest as git must
// get it) within git.max_push and the swarm's git.max_mirror. Refused, it
// has answered with a report git prints as "[remote rejected]"; admitted,
// r carries the spooled body and done must be called once git is through.
func (s *Service) admitPush(w http.ResponseWriter, r *http.Request, rec record, cmds PushCommands, body io.Reader) (done func(), ok bool) {
	f, n, err := s.spool(body, s.limits.MaxPush)
	switch {
	case errors.Is(err, errOverLimit):
		s.log.Warn("push refused: larger than git.max_push", "container", rec.Container, "limit", s.limits.MaxPush, "readBytes", n)
		s.refused(rec, refusedMaxPush, fmt.Sprintf("a push larger than %s, the limit of one push (%s), was refused", humanBytes(s.limits.MaxPush), KeyMaxPush))
		s.refusePush(w, r, cmds, func(RefUpdate) string {
			return fmt.Sprintf("aimi: push refused: it is larger than %s, the limit of one push (%s); commit no build output or data, or have the user raise %s",
				humanBytes(s.limits.MaxPush), KeyMaxPush, KeyMaxPush)
		})
		return nil, false
	case err != nil:
		s.log.Info("push not read whole", "container", rec.Container, "readBytes", n, "err", err)
		deny(w, http.StatusBadRequest, "aimi git service: the push did not arrive whole; try again")
		return nil, false
	}
	release, used, ok, err := s.reserveMirror(rec.SwarmKey, n)
	if err != nil {
		f.Close()
		s.log.Error("measure a mirror before a push", "swarm", rec.SwarmKey, "err", err)
		deny(w, http.StatusInternalServerError, "aimi git service: cannot measure the swarm's repository; try again")
		return nil, false
	}
	if !ok {
		f.Close()
		s.log.Warn("push refused: the swarm's mirror would pass git.max_mirror", "container", rec.Container, "swarm", rec.SwarmKey, "used", used, "push", n, "limit", s.limits.MaxMirror)
		s.refused(rec, refusedMaxMirror, fmt.Sprintf("a push of %s was refused: the swarm's pushes hold %s of the %s they may add to its repository (%s)",
			humanBytes(n), humanBytes(used), humanBytes(s.limits.MaxMirror), KeyMaxMirror))
		s.refusePush(w, r, cmds, func(RefUpdate) string {
			return fmt.Sprintf("aimi: push refused: the swarm's pushes hold %s of the %s they may add to its repository (%s) and this push is %s; have the user raise %s",
				humanBytes(used), humanBytes(s.limits.MaxMirror), KeyMaxMirror, humanBytes(n), KeyMaxMirror)
		})
		return nil, false
	}
	useSpooled(r, f, n)
	return func() { f.Close(); release() }, true
}

// refusePush reads what is left of the request (git sends the whole pack
// before it reads an answer, and an answer to a half-read body ends as
// "broken pipe" instead of the reason) and answers with the refusal of
// every update of cmds.
func (s *Service) refusePush(w http.ResponseWriter, r *http.Request, cmds PushCommands, reason func(RefUpdate) string) {
	s.countPush(false)
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxDrain))
	w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(refusalReport(cmds, reason))
}

// spoolFetch spools the body of a clone or fetch (inflated, at most
// maxFetchBody). It answers and returns false when it cannot.
func (s *Service) spoolFetch(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	body := io.Reader(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			deny(w, http.StatusBadRequest, "aimi git service: request body is not valid gzip")
			return nil, false
		}
		body = zr
	}
	f, n, err := s.spool(body, maxFetchBody)
	switch {
	case errors.Is(err, errOverLimit):
		deny(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("aimi git service: a fetch request larger than %s is refused", humanBytes(maxFetchBody)))
		return nil, false
	case err != nil:
		deny(w, http.StatusBadRequest, "aimi git service: the request did not arrive whole; try again")
		return nil, false
	}
	useSpooled(r, f, n)
	return func() { f.Close() }, true
}

// mirrorQuota holds the bytes of pushes under way per swarm, so that
// concurrent pushes of one swarm cannot pass git.max_mirror together.
type mirrorQuota struct {
	mu       sync.Mutex
	reserved map[string]int64
}

// reserveMirror checks that a push of n bytes fits in swarm key's
// git.max_mirror and, if so, reserves it until release.
func (s *Service) reserveMirror(key string, n int64) (release func(), used int64, ok bool, err error) {
	q := &s.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	used, err = s.pushedBytes(key)
	if err != nil {
		return nil, 0, false, err
	}
	used += q.reserved[key]
	if used+n > s.limits.MaxMirror {
		return nil, used, false, nil
	}
	q.reserved[key] += n
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.reserved[key] -= n; q.reserved[key] <= 0 {
			delete(q.reserved, key)
		}
	}, used, true, nil
}

// pushedBytes is what the pushes of swarm key added to its mirror: its
// size minus its base. A mirror without a base (no push checked yet:
// every push is, under the quota's lock, before it writes) takes its
// size now as its base.
func (s *Service) pushedBytes(key string) (int64, error) {
	mirror := s.mirrorPath(key)
	size, err := dirBytes(mirror)
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(filepath.Join(mirror, baseName))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, writeBase(mirror, size)
	}
	if err != nil {
		return 0, fmt.Errorf("read the base size of %s: %w", mirror, err)
	}
	base, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the base size of %s is not a number: %w", mirror, err)
	}
	return max(0, size-base), nil
}

// addBase adds the growth of a mirror that the user's own commits made
// (a refresh) to its base. A mirror without a base yet (no push so far)
// takes it whole at its first push.
func addBase(mirror string, grew int64) error {
	if grew <= 0 {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(mirror, baseName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	base, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return err
	}
	return writeBase(mirror, base+grew)
}

func writeBase(mirror string, n int64) error {
	if err := os.WriteFile(filepath.Join(mirror, baseName), []byte(strconv.FormatInt(n, 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("record the base size of %s: %w", mirror, err)
	}
	return nil
}

// dirBytes is the size of the regular files under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			// A file git removed while this walked (a quarantine
			// dropped, a pack replaced) is not an error.
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measure %s: %w", dir, err)
	}
	return n, nil
}

// humanBytes prints n in binary units, as git.max_push is read (100m is
// 100 MiB).
func humanBytes(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size {
			return strings.TrimSuffix(strconv.FormatFloat(float64(n)/float64(u.size), 'f', 1, 64), ".0") + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
