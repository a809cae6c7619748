package runner

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/tasks"
)

// flakyFront forwards TCP to a repository server while up; while down it
// drops every connection at once, as a git service does while its daemon
// restarts.
type flakyFront struct {
	ln     net.Listener
	up     atomic.Bool
	wg     sync.WaitGroup
	URL    string
	mu     sync.Mutex
	seen   int // connections dropped while down
	active map[net.Conn]bool
}

// down drops the connections in flight too (a daemon that dies takes its
// connections with it) and every new one until up.
func (f *flakyFront) down() {
	f.up.Store(false)
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.active {
		c.Close()
	}
}

func newFlakyFront(t *testing.T, repoURL string) *flakyFront {
	u, err := url.Parse(repoURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &flakyFront{ln: ln, active: map[net.Conn]bool{}}
	f.up.Store(true)
	f.URL = "https://" + ln.Addr().String() + u.Path
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !f.up.Load() {
				f.mu.Lock()
				f.seen++
				f.mu.Unlock()
				c.Close()
				continue
			}
			f.wg.Add(1)
			f.mu.Lock()
			f.active[c] = true
			f.mu.Unlock()
			go func() {
				defer f.wg.Done()
				defer func() {
					f.mu.Lock()
					delete(f.active, c)
					f.mu.Unlock()
					c.Close()
				}()
				b, err := net.Dial("tcp", u.Host)
				if err != nil {
					return
				}
				defer b.Close()
				go func() { _, _ = io.Copy(b, c); b.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, b)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); f.down(); f.wg.Wait() })
	return f
}

func (f *flakyFront) dropped() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen
}

func TestPushRetriesWhileTheRepositoryIsAway(t *testing.T) {
	cases := []struct {
		name      string
		comeBack  bool
		pushRetry time.Duration
	}{
		{"the service comes back: every story reaches the branch and the run completes", true, time.Minute},
		{"the service stays away: the run fails naming the commits and how to get them", false, 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fixture(t, linear) // three stories in a chain
			s := newScenario(t, f, "tok-retry")
			front := newFlakyFront(t, s.srv.URL)
			s.cfg.Agent = AgentExec
			// The first story takes the service down (the daemon dies)
			// before its push; each story commits a file of its own.
			var once sync.Once
			s.cfg.onAgentStart = func(int) { once.Do(front.down) }
			s.cfg.AgentCommand = `echo "$AIMI_STORY_ID" > "$AIMI_STORY_ID.txt"`
			s.cfg.PushRetry = tc.pushRetry
			req := strings.Replace(s.request(t), s.srv.URL, front.URL, 1)
			done := make(chan struct{})
			if tc.comeBack {
				go func() {
					defer close(done)
					// Back once the runner has met the closed door a few times.
					deadline := time.Now().Add(30 * time.Second)
					for front.dropped() < 3 && time.Now().Before(deadline) {
						time.Sleep(20 * time.Millisecond)
					}
					front.up.Store(true)
				}()
			} else {
				close(done)
			}
			_, msgs := runScenario(t, context.Background(), s, req)
			<-done
			c := completionOf(t, msgs)
			if front.dropped() == 0 {
				t.Fatal("the service was never away; the test proves nothing")
			}
			if tc.comeBack {
				if c.Status != acpmsg.CompletionCompleted || len(c.Errors) != 0 {
					t.Fatalf("completion %+v", c)
				}
				for _, st := range f.UserStories {
					if got := finalStatuses(t, s)[st.ID]; got != tasks.Completed {
						t.Errorf("%s is %q on the received branch, want completed", st.ID, got)
					}
				}
				return
			}
			errs := strings.Join(c.Errors, "\n")
			if c.Status != acpmsg.CompletionFailed || !strings.Contains(errs, acpmsg.CodeGitPushFailed) || !strings.Contains(errs, "aimi swarm fetch") {
				t.Fatalf("completion %+v, want failed with %s and how to fetch", c, acpmsg.CodeGitPushFailed)
			}
			head := gitOut(t, s.cfg.Workspace, "rev-parse", "HEAD")
			if !strings.Contains(errs, head[:12]) {
				t.Errorf("errors %q do not name the unreceived tip %s", errs, head[:12])
			}
		})
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	g := newGit(&Config{Workspace: dir, Env: os.Environ()})
	out, err := g.run(context.Background(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The daemon killed between sending the task-request and the clone: the
// clone waits for the service to come back; with it gone for good the
// run fails at the clone after its budget.
func TestCloneRetriesWhileTheRepositoryIsAway(t *testing.T) {
	for _, comeBack := range []bool{true, false} {
		t.Run(fmt.Sprintf("comes back %v", comeBack), func(t *testing.T) {
			f := oneStory(t)
			s := newScenario(t, f, "tok-clone-retry")
			front := newFlakyFront(t, s.srv.URL)
			front.down()
			s.cfg.PushRetry = time.Minute
			if !comeBack {
				s.cfg.PushRetry = 2 * time.Second
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				if !comeBack {
					return
				}
				deadline := time.Now().Add(30 * time.Second)
				for front.dropped() < 2 && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				front.up.Store(true)
			}()
			req := strings.Replace(s.request(t), s.srv.URL, front.URL, 1)
			_, msgs := runScenario(t, context.Background(), s, req)
			<-done
			if front.dropped() == 0 {
				t.Fatal("the service was never away; the test proves nothing")
			}
			if comeBack {
				if c := completionOf(t, msgs); c.Status != acpmsg.CompletionCompleted || len(c.Errors) != 0 {
					t.Fatalf("completion %+v", c)
				}
				return
			}
			e, ok := msgs[len(msgs)-1].Payload.(*acpmsg.ErrorPayload)
			if !ok || e.Code != acpmsg.CodeGitCloneFailed || !strings.Contains(e.Message, "attempts over") {
				t.Fatalf("last message %+v, want %s after retries", msgs[len(msgs)-1].Payload, acpmsg.CodeGitCloneFailed)
			}
		})
	}
}
