// Command standin is the scripted stand-in for acp-runner used by the
// orchestrator's tests: it reads the task-request line from stdin and then
// follows a script from its environment, emitting swarm messages (and, on
// purpose, bad lines) at a chosen pace. It is built into a FROM-scratch test
// image; it never runs in production.
//
// The script is STANDIN_SCRIPT__<KEY> where KEY is the task file's base name
// upper-cased with every other character than A-Z0-9 turned into '_' (so one
// env map can script every container of a swarm), else STANDIN_SCRIPT.
// Steps are separated by ';', fields by '|':
//
//	pace|50ms                   sleep this long before every later emitted line
//	auto|N                      US-001..US-N: in_progress then completed each, then completion completed
//	progress|US-001|in_progress|output
//	complete|completed|https://example.com/pr/1   (prUrl optional; "-" = null)
//	error|CODE|message
//	raw|text                    the text as one line, verbatim (garbage)
//	hex|HEX                     the bytes HEX stands for as one line, verbatim (any byte, ';' and '|' too)
//	big|N                       one line of N bytes
//	flood|N|US-001              N progress-updates in_progress for the story, no pace
//	errflood|N                  N lines "err <i>" on stderr, as fast as they go
//	sleep|2s
//	trap                        on SIGTERM: completion stopped, exit 0
//	ignoreterm                  ignore SIGTERM (only the kill after the grace ends it)
//	oom                         allocate and touch memory until killed
//	exit|N                      exit with code N now
//
// Without an exit step the program exits 0 at the end of the script.
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aimi-tools/swarm/contract"
	aimirunner "github.com/aimi-tools/swarm/runner"

	"github.com/aimi-tools/swarm/acpmsg"
)

type runner struct {
	mu          sync.Mutex
	out         *bufio.Writer
	swarmID     string
	containerID string
	pace        time.Duration
}

func main() {
	// Taken the way acp-runner takes them, so the stand-in runs on every
	// engine backend: secrets from files, the request from a file or stdin.
	if err := aimirunner.LoadSecretEnv(os.Getenv, os.Setenv, contract.SecretDir); err != nil {
		fmt.Fprintln(os.Stderr, "standin:", err)
		os.Exit(2)
	}
	src, err := aimirunner.RequestInput(os.Getenv, os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "standin:", err)
		os.Exit(2)
	}
	in := bufio.NewReaderSize(src, 128*1024)
	line, err := in.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		fmt.Fprintln(os.Stderr, "standin: no task-request on stdin:", err)
		os.Exit(2)
	}
	var req struct {
		SwarmID     string `json:"swarmId"`
		ContainerID string `json:"containerId"`
		Payload     struct {
			TaskFilePath string `json:"taskFilePath"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(line, &req); err != nil {
		fmt.Fprintln(os.Stderr, "standin: bad task-request:", err)
		os.Exit(2)
	}
	r := &runner{out: bufio.NewWriterSize(os.Stdout, 64*1024), swarmID: req.SwarmID, containerID: req.ContainerID}
	script := os.Getenv("STANDIN_SCRIPT__" + key(req.Payload.TaskFilePath))
	if script == "" {
		script = os.Getenv("STANDIN_SCRIPT")
	}
	os.Exit(r.run(script))
}

// key turns a task file path into the env suffix of its script.
func key(p string) string {
	b := []byte(strings.ToUpper(path.Base(p)))
	for i, c := range b {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

func (r *runner) run(script string) int {
	for _, step := range strings.Split(script, ";") {
		step = strings.TrimSpace(step)
		if step == "" {
			continue
		}
		f := fields(strings.Split(step, "|"))
		if r.message(f) {
			continue
		}
		if code, exit := r.act(f); exit {
			return code
		}
	}
	r.flush()
	return 0
}

// fields are one step's name and arguments.
type fields []string

// arg is the ith field, "" past the end.
func (f fields) arg(i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

// message runs a step that only writes lines to stdout, and reports whether
// f was one.
func (r *runner) message(f fields) bool {
	switch f[0] {
	case "auto":
		n, _ := strconv.Atoi(f.arg(1))
		for i := 1; i <= n; i++ {
			id := fmt.Sprintf("US-%03d", i)
			r.emit(&acpmsg.ProgressUpdate{StoryID: id, Status: "in_progress", Output: "working on " + id})
			r.emit(&acpmsg.ProgressUpdate{StoryID: id, Status: "completed", Output: "done " + id})
		}
		r.emit(&acpmsg.Completion{Status: "completed", Errors: []string{}})
	case "progress":
		r.emit(&acpmsg.ProgressUpdate{StoryID: f.arg(1), Status: f.arg(2), Output: f.arg(3)})
	case "complete":
		c := &acpmsg.Completion{Status: f.arg(1), Errors: []string{}}
		if u := f.arg(2); u != "" && u != "-" {
			c.PRURL = &u
		}
		r.emit(c)
	case "error":
		r.emit(&acpmsg.ErrorPayload{Code: f.arg(1), Message: f.arg(2)})
	case "raw":
		r.line([]byte(f.arg(1)))
	case "big":
		n, _ := strconv.Atoi(f.arg(1))
		r.line([]byte(strings.Repeat("x", n)))
	case "flood":
		n, _ := strconv.Atoi(f.arg(1))
		pace := r.pace
		r.pace = 0
		for i := 0; i < n; i++ {
			r.emit(&acpmsg.ProgressUpdate{StoryID: f.arg(2), Status: "in_progress", Output: "flood " + strconv.Itoa(i)})
		}
		r.pace = pace
	default:
		return false
	}
	return true
}

// act runs every other step; exit reports that the program ends with code.
func (r *runner) act(f fields) (code int, exit bool) {
	switch f[0] {
	case "pace":
		r.pace, _ = time.ParseDuration(f.arg(1))
	case "hex":
		b, err := hex.DecodeString(f.arg(1))
		if err != nil {
			fmt.Fprintln(os.Stderr, "standin: bad hex step:", err)
			return 2, true
		}
		r.line(b)
	case "errflood":
		n, _ := strconv.Atoi(f.arg(1))
		r.flush()
		w := bufio.NewWriterSize(os.Stderr, 64*1024)
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, "err %d\n", i)
		}
		w.Flush()
	case "sleep":
		d, _ := time.ParseDuration(f.arg(1))
		r.flush()
		time.Sleep(d)
	case "trap":
		r.trap()
	case "ignoreterm":
		signal.Ignore(syscall.SIGTERM)
	case "oom":
		r.flush()
		oom()
	case "exit":
		n, _ := strconv.Atoi(f.arg(1))
		r.flush()
		return n, true
	default:
		fmt.Fprintln(os.Stderr, "standin: unknown step", strings.Join(f, "|"))
		r.flush()
		return 3, true
	}
	return 0, false
}

// trap makes SIGTERM end the program with a stopped completion.
func (r *runner) trap() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		<-sig
		r.pace = 0
		r.emit(&acpmsg.Completion{Status: "stopped", Errors: []string{"stopped by SIGTERM"}})
		r.flush()
		os.Exit(0)
	}()
}

// oom allocates and touches memory until the container is killed.
func oom() {
	var hold [][]byte
	for {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = 1
		}
		//lint:ignore SA4010 the chunks are held, never read, to run the container out of memory
		hold = append(hold, b)
	}
}

func (r *runner) emit(p acpmsg.Payload) {
	m := acpmsg.Message{
		Timestamp:   time.Now().UTC().Format(time.RFC3339Nano),
		SwarmID:     r.swarmID,
		ContainerID: r.containerID,
		Payload:     p,
	}
	switch p.(type) {
	case *acpmsg.ProgressUpdate:
		m.Type = acpmsg.TypeProgressUpdate
	case *acpmsg.Completion:
		m.Type = acpmsg.TypeCompletion
	case *acpmsg.ErrorPayload:
		m.Type = acpmsg.TypeError
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	r.line(b)
}

// line writes one line; with a pace it is flushed at once so the reader sees
// the lines arrive over time.
func (r *runner) line(b []byte) {
	if r.pace > 0 {
		time.Sleep(r.pace)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out.Write(b)
	r.out.WriteByte('\n')
	if r.pace > 0 {
		r.out.Flush()
	}
}

func (r *runner) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out.Flush()
}
