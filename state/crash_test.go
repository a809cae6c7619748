package state

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/tasks"
)

// Child processes are this test binary re-executed with these variables.
const (
	helperModeEnv = "AIMI_STATE_HELPER" // save-loop | record-loop | update-counter
	helperRootEnv = "AIMI_STATE_ROOT"   // repository root to work in
	helperNEnv    = "AIMI_STATE_N"      // iterations for update-counter
)

// TestHelperProcess is the child side; it does nothing in a normal run.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperModeEnv)
	if mode == "" {
		t.Skip("helper process only")
	}
	root := os.Getenv(helperRootEnv)
	ctx := context.Background()
	var err error
	switch mode {
	case "save-loop":
		err = saveLoop(ctx, root)
	case "record-loop":
		err = recordLoop(ctx, root)
	case "update-counter":
		n, _ := strconv.Atoi(os.Getenv(helperNEnv))
		err = updateCounter(ctx, Open(root), n)
	default:
		err = fmt.Errorf("unknown helper mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// saveLoop saves ever-changing states (growing and shrinking, so a torn
// write would show) until killed, saying "ready" after the first.
func saveLoop(ctx context.Context, root string) error {
	st := Open(root)
	for i := 0; ; i++ {
		n := 1 + i%17
		names := make([]string, n)
		for k := range names {
			names[k] = fmt.Sprintf("aimi-swarm-c%d", k)
		}
		sw := newTestSwarm(names...)
		sw.UpdatedAt = time.Now()
		for k, c := range sw.Containers {
			c.StoryProgress = Progress{Total: i % 100, Completed: (i + k) % 50}
			if k%2 == 0 {
				c.PRURL = ptr(fmt.Sprintf("https://example.com/org/repo/pull/%d", i))
				c.ACPPID = ptr(i + 1)
			}
		}
		if err := st.Save(ctx, sw); err != nil {
			return err
		}
		if i == 0 {
			fmt.Println("ready")
		}
	}
}

const crashStories = 999

// recordLoop drives a Recorder with a monotone stream (stories only move
// forward) over three containers until killed.
func recordLoop(ctx context.Context, root string) error {
	rec := NewRecorder(Open(root), newTestSwarm(), RecorderOptions{})
	names := []string{"c0", "c1", "c2"}
	for i, n := range names {
		if err := rec.Track(newTestContainer(i, n), NewTracker(pendingFile(crashStories))); err != nil {
			return err
		}
	}
	if err := rec.Flush(ctx); err != nil {
		return err
	}
	fmt.Println("ready")
	seq := 0
	for s := range crashStories {
		for _, st := range []tasks.Status{tasks.InProgress, tasks.Completed} {
			for ci, n := range names {
				seq++
				m := progress(seq, storyID(s), st)
				m.ContainerID = fmt.Sprintf("abc000abc%03x", ci)
				if err := rec.Record(ctx, n, Record{Cursor: cursor(seq), Stream: StreamStdout}, &m); err != nil {
					return err
				}
			}
		}
	}
	rec.Close(ctx)
	select {} // wait to be killed
}

func startHelper(t *testing.T, mode, root string, extra ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperModeEnv+"="+mode, helperRootEnv+"="+root)
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewReader(out)
}

func waitReady(t *testing.T, r *bufio.Reader) {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("helper did not get ready: %q %v", line, err)
	}
}

func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

// TestCrashWhileSavingLeavesAValidFile SIGKILLs a process saving in a tight
// loop at random moments; after every kill the file parses and validates.
func TestCrashWhileSavingLeavesAValidFile(t *testing.T) {
	kills := 30
	if testing.Short() {
		kills = 5
	}
	sch := compileSchema(t)
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	root := t.TempDir()
	st := Open(root)
	for i := range kills {
		cmd, out := startHelper(t, "save-loop", root)
		waitReady(t, out)
		time.Sleep(time.Duration(rng.IntN(30_000)) * time.Microsecond)
		kill(t, cmd)
		b, err := os.ReadFile(st.Path())
		if err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		if err := validateState(sch, b); err != nil {
			t.Fatalf("kill %d: file does not validate: %v\n%s", i, err, b)
		}
		if _, err := st.Load(context.Background()); err != nil {
			t.Fatalf("kill %d: Load: %v", i, err)
		}
	}
}

// TestCrashWhileRecordingNeverSavesAheadOfTheJournal SIGKILLs a process
// recording a monotone stream; after every kill the state file validates
// and reflects no more than the durable journal holds.
func TestCrashWhileRecordingNeverSavesAheadOfTheJournal(t *testing.T) {
	kills := 15
	if testing.Short() {
		kills = 3
	}
	sch := compileSchema(t)
	rng := rand.New(rand.NewPCG(9, uint64(time.Now().UnixNano())))
	for i := range kills {
		root := t.TempDir()
		st := Open(root)
		cmd, out := startHelper(t, "record-loop", root)
		waitReady(t, out)
		time.Sleep(time.Duration(rng.IntN(80_000)) * time.Microsecond)
		kill(t, cmd)
		b, err := os.ReadFile(st.Path())
		if err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		if err := validateState(sch, b); err != nil {
			t.Fatalf("kill %d: file does not validate: %v", i, err)
		}
		sw, err := st.Load(context.Background())
		if err != nil {
			t.Fatalf("kill %d: Load: %v", i, err)
		}
		for _, c := range sw.Containers {
			jpath := st.JournalPath(contract.Sandbox{Swarm: sw.SwarmID, Container: c.ContainerName})
			if _, err := ReadJournal(jpath); err != nil {
				t.Fatalf("kill %d: journal unreadable: %v", i, err)
			}
			tr, _, err := RestoreTracker(jpath, pendingFile(crashStories))
			if err != nil {
				t.Fatalf("kill %d: %v", i, err)
			}
			j, s := tr.Progress(), c.StoryProgress
			if s.Completed > j.Completed || s.Completed+s.InProgress > j.Completed+j.InProgress {
				t.Fatalf("kill %d: %s state %+v is ahead of its journal %+v", i, c.ContainerName, s, j)
			}
			t.Logf("kill %d: %s state %d/%d completed, journal %d", i, c.ContainerName, s.Completed, s.Total, j.Completed)
		}
	}
}

// updateCounter increments the "counter" entry's completed count n times
// through Update, which holds the flock around load-modify-save.
func updateCounter(ctx context.Context, st *Store, n int) error {
	for range n {
		err := st.Update(ctx, func(s *Swarm) error {
			c := s.Container("counter")
			if c == nil {
				return errors.New("no counter entry")
			}
			c.StoryProgress.Completed++
			c.StoryProgress.Total++
			s.UpdatedAt = time.Now()
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// TestConcurrentWriterReadersAndAnotherProcess runs a writer goroutine, a
// second process and this process both incrementing a counter through the
// flock, and readers checking every file they see; no reader may see a
// partial or invalid file, and no increment may be lost.
func TestConcurrentWriterReadersAndAnotherProcess(t *testing.T) {
	const n = 150
	ctx := context.Background()
	sch := compileSchema(t)
	root := t.TempDir()
	st := Open(root)
	sw := newTestSwarm("counter", "churn")
	if err := st.Save(ctx, sw); err != nil {
		t.Fatal(err)
	}
	cmd, _ := startHelper(t, "update-counter", root, helperNEnv+"="+strconv.Itoa(n))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for r := range 3 {
		wg.Go(func() {
			reader := Open(root)
			for reads := 0; ; reads++ {
				select {
				case <-stop:
					return
				default:
				}
				b, err := os.ReadFile(reader.Path())
				if err == nil {
					err = validateState(sch, b)
				}
				if err == nil {
					_, err = reader.Load(ctx)
				}
				if err != nil {
					errs <- fmt.Errorf("reader %d, read %d: %w", r, reads, err)
					return
				}
			}
		})
	}
	// the writer: counter increments plus a churning entry that grows and
	// shrinks the file
	if err := updateCounter(ctx, st, n); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		err := st.Update(ctx, func(s *Swarm) error {
			c := s.Container("churn")
			c.TaskFilePath = fmt.Sprintf(".aimi/tasks/%0*d-tasks.json", i%200, 0)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("second process: %v", err)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Container("counter"); c.StoryProgress.Completed != 2*n {
		t.Fatalf("counter = %d, want %d: an update was lost", c.StoryProgress.Completed, 2*n)
	}
}
