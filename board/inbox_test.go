package board

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/browsertest"
)

func (f *fakeDaemon) Inbox(_ context.Context, repo string) (api.Inbox, error) {
	f.call("inbox")
	f.mu.Lock()
	defer f.mu.Unlock()
	return api.Inbox{Requests: append([]api.PermissionRequest{}, f.inbox.Requests...)}, nil
}

// Answer answers like the daemon: an option the request does not offer is
// refused; an answered request leaves the inbox.
func (f *fakeDaemon) Answer(_ context.Context, req api.AnswerRequest) (api.AnswerReport, error) {
	f.call("answer")
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, q := range f.inbox.Requests {
		if q.ID != req.ID {
			continue
		}
		for _, o := range q.Options {
			if o.ID == req.Option {
				f.answers = append(f.answers, req)
				f.inbox.Requests = append(f.inbox.Requests[:i], f.inbox.Requests[i+1:]...)
				return api.AnswerReport{Answered: []api.Answered{{ID: q.ID, ContainerName: q.ContainerName, OptionID: o.ID}}}, nil
			}
		}
		return api.AnswerReport{}, &api.APIError{Status: 400, Body: api.ErrorBody{Error: fmt.Sprintf("option %q is not one the agent offered", req.Option), Code: api.CodeInvalid}}
	}
	return api.AnswerReport{}, &api.APIError{Status: 404, Body: api.ErrorBody{Error: "no pending request " + req.ID, Code: api.CodeNotFound}}
}

func (f *fakeDaemon) answered() []api.AnswerRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.AnswerRequest(nil), f.answers...)
}

func pendingRequest() api.PermissionRequest {
	now := time.Now().UTC()
	return api.PermissionRequest{ID: "9889fb5e01", RepoPath: "/home/dev/web", SwarmID: "6f1c2d3e", ContainerName: "aimi-web", StoryID: "US-002",
		Title: "Run " + hostile, Kind: "execute", Command: "make test\x1b[2J", AskedAt: now, Deadline: now.Add(30 * time.Minute),
		Options: []api.PermissionOption{{ID: "run", Name: "Run it", Kind: "allow_once"}, {ID: "skip", Name: "Skip it", Kind: "reject_once"}}}
}

// TestInboxRoutesCleanTextAndPassAnswersOn: /api/inbox strips control
// characters from agent text; /api/answer passes an answer on, and the
// daemon's refusal of an option not offered keeps its status.
func TestInboxRoutesCleanTextAndPassAnswersOn(t *testing.T) {
	f := &fakeDaemon{inbox: api.Inbox{Requests: []api.PermissionRequest{pendingRequest()}}}
	base, _ := serveBoard(t, f)
	c := session(t, base)
	resp, err := c.Get(base + "/api/inbox")
	if err != nil {
		t.Fatal(err)
	}
	var in api.Inbox
	err = json.NewDecoder(resp.Body).Decode(&in)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Requests) != 1 || strings.ContainsRune(in.Requests[0].Command, 0x1b) {
		t.Errorf("inbox: %+v", in)
	}
	if code, body := post(t, c, base, "/api/answer", `{"repo":"/home/dev/web","id":"9889fb5e01","option":"maybe"}`, map[string]string{"Content-Type": "application/json"}); code != http.StatusBadRequest || !strings.Contains(body, "not one the agent offered") {
		t.Errorf("an option not offered: %d %s", code, body)
	}
	if code, body := post(t, c, base, "/api/answer", `{"repo":"/home/dev/web","id":"9889fb5e01","option":"skip"}`, map[string]string{"Content-Type": "application/json"}); code != http.StatusOK || !strings.Contains(body, `"optionId":"skip"`) {
		t.Errorf("answer: %d %s", code, body)
	}
}

// TestPageShowsTheInboxAndAnswersFromTheKeyboard: the real page in
// Chromium shows the waiting request (its count in the title, hostile text
// as text), Tab reaches its option buttons, Enter answers, and the request
// leaves the page.
func TestPageShowsTheInboxAndAnswersFromTheKeyboard(t *testing.T) {
	f := &fakeDaemon{events: make(chan api.Event), list: fakeSwarm(), inbox: api.Inbox{Requests: []api.PermissionRequest{pendingRequest()}}}
	base, _ := serveBoard(t, f)
	actx, _ := browsertest.Start(t)
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute) // minutes: a loaded machine
	defer cancelT()
	req := `#inbox-list [data-request="9889fb5e01"]`
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#token="+testToken), chromedp.WaitVisible(chromedp.CSS(req+` button[data-option="run"]`))); err != nil {
		html, _ := chromedp.Run(context.WithoutCancel(ctx), chromedp.OuterHTML(chromedp.CSS("body")))
		t.Fatalf("%v; page: %s", err, html)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`({title: document.title, imgs: document.querySelectorAll('img').length,
		text: document.querySelector('#inbox-list').textContent})`))
	if err != nil {
		t.Fatal(err)
	}
	if got["title"] != "(1) aimi swarm board" || got["imgs"].(float64) != 0 || !strings.Contains(got["text"].(string), hostile) || strings.ContainsRune(got["text"].(string), 0x1b) {
		t.Errorf("page: %+v", got)
	}
	found := false
	for i := 0; i < 30 && !found; i++ {
		if err := chromedp.Do(ctx, chromedp.KeyEvent("\t")); err != nil {
			t.Fatal(err)
		}
		on, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.activeElement.matches('`+req+` button[data-option="skip"]')`))
		if err != nil {
			t.Fatal(err)
		}
		found = on
	}
	if !found {
		t.Fatal("Tab never reached the request's Skip button")
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`#inbox-result[data-state="ok"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(req))); err != nil {
		t.Fatal(err)
	}
	if a := f.answered(); len(a) != 1 || a[0].ID != "9889fb5e01" || a[0].Option != "skip" || a[0].RepoPath != "/home/dev/web" {
		t.Errorf("answers: %+v", a)
	}
	title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.title`))
	if err != nil || title != "aimi swarm board" {
		t.Errorf("title after the answer: %q %v", title, err)
	}
}
