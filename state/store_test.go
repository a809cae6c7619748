package state

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/atomicfile"
)

func TestMarshalHasExactlyTheSchemaShape(t *testing.T) {
	sch := compileSchema(t)
	local := time.FixedZone("CET", 3600)
	sw := newTestSwarm("aimi-swarm-auth", "aimi-swarm-db")
	sw.CreatedAt = time.Date(2026, 11, 22, 11, 31, 0, 0, local)
	sw.Containers[0].PRURL = ptr("https://github.com/org/repo/pull/42")
	sw.Containers[0].ACPPID = ptr(42)
	sw.Containers[0].StoryProgress = Progress{Total: 5, Completed: 5}
	b, err := json.Marshal(sw)
	if err != nil {
		t.Fatal(err)
	}
	if err := validateState(sch, b); err != nil {
		t.Fatalf("marshalled state does not validate: %v\n%s", err, b)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["createdAt"] != "2026-11-22T10:31:00Z" {
		t.Errorf("createdAt = %v, want RFC 3339 in UTC", raw["createdAt"])
	}
	c1 := raw["containers"].([]any)[1].(map[string]any)
	for _, k := range []string{"prUrl", "acpPid"} {
		if v, ok := c1[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null", k, v, ok)
		}
	}
	if names := []string{raw["containers"].([]any)[0].(map[string]any)["containerName"].(string), c1["containerName"].(string)}; names[0] != "aimi-swarm-auth" || names[1] != "aimi-swarm-db" {
		t.Errorf("containers out of insertion order: %v", names)
	}
	back, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(back)
	if string(b) != string(b2) {
		t.Errorf("round trip changed the file:\n%s\n%s", b, b2)
	}
	empty, _ := json.Marshal(&Swarm{SwarmID: testSwarmID, CreatedAt: t0, UpdatedAt: t0})
	if err := validateState(sch, empty); err != nil || !strings.Contains(string(empty), `"containers":[]`) {
		t.Errorf("swarm without containers: %s (%v)", empty, err)
	}
}

func TestValidateRefusesWhatTheSchemaRefuses(t *testing.T) {
	sch := compileSchema(t)
	cases := []struct {
		name string
		mut  func(*Swarm)
	}{
		{"uppercase swarm id", func(s *Swarm) { s.SwarmID = strings.ToUpper(s.SwarmID) }},
		{"container without engine id", func(s *Swarm) { s.Containers[0].ContainerID = "" }},
		{"bad container name", func(s *Swarm) { s.Containers[0].ContainerName = "-x" }},
		{"bad branch", func(s *Swarm) { s.Containers[0].BranchName = "feat branch" }},
		{"unknown status", func(s *Swarm) { s.Containers[0].Status = "done" }},
		{"relative prUrl", func(s *Swarm) { s.Containers[0].PRURL = ptr("pull/42") }},
		{"zero acpPid", func(s *Swarm) { s.Containers[0].ACPPID = ptr(0) }},
		{"negative counter", func(s *Swarm) { s.Containers[0].StoryProgress.Pending = -1 }},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			sw := newTestSwarm("a")
			tc.mut(sw)
			if err := sw.Validate(); err == nil {
				t.Fatal("Validate accepted it")
			}
			b, _ := json.Marshal(sw)
			if err := validateState(sch, b); err == nil {
				t.Fatalf("the schema accepts what Validate refuses: %s", b)
			}
			if err := Open(t.TempDir()).Save(context.Background(), sw); err == nil {
				t.Fatal("Save wrote it")
			}
		})
	}
}

func TestStoreLoadSave(t *testing.T) {
	ctx := context.Background()
	t.Run("missing file is ErrNoState", func(t *testing.T) {
		if _, err := Open(t.TempDir()).Load(ctx); !errors.Is(err, ErrNoState) {
			t.Fatalf("Load = %v", err)
		}
	})
	t.Run("saved state loads back equal", func(t *testing.T) {
		st := Open(t.TempDir())
		sw := newTestSwarm("a", "b")
		sw.Containers[1].PRURL = ptr("https://x.test/pr/1")
		if err := st.Save(ctx, sw); err != nil {
			t.Fatal(err)
		}
		got, err := st.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(sw)
		b, _ := json.Marshal(got)
		if string(a) != string(b) {
			t.Fatalf("loaded %s, saved %s", b, a)
		}
		fi, _ := os.Stat(st.Path())
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("mode %v, want 0644", fi.Mode().Perm())
		}
		ents, _ := os.ReadDir(filepath.Dir(st.Path()))
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), atomicfile.TempPrefix(st.Path())) {
				t.Errorf("temp file left: %s", e.Name())
			}
		}
	})
	storeCorruptFileCases(t, ctx)
	storeUpdateCases(t, ctx)
	storeUpkeepCases(t, ctx)
}

// storeCorruptFileCases are TestStoreLoadSave's subtests of a state file that does
// not parse: a read reports it and leaves it, a recorder's save moves it aside.
func storeCorruptFileCases(t *testing.T, ctx context.Context) {
	for _, tc := range []struct{ name, content string }{
		{"empty file", ""},
		{"whitespace only", "  \n"},
		{"truncated JSON", `{"swarmId":"6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b","createdAt":"2026`},
		{"not an object", `[1,2]`},
		{"object without swarmId", `{}`},
		{"wrong type", `{"swarmId":"x","containers":{}}`},
	} {
		t.Run(tc.name+" is reported and left as it is", func(t *testing.T) {
			st := Open(t.TempDir())
			os.MkdirAll(filepath.Dir(st.Path()), 0o755)
			os.WriteFile(st.Path(), []byte(tc.content), 0o644)
			before := dirNames(t, filepath.Dir(st.Path()))
			_, err := st.Load(ctx)
			var cerr *CorruptError
			if !errors.As(err, &cerr) || cerr.MovedTo != "" || !strings.Contains(err.Error(), "left as it is") {
				t.Fatalf("Load = %v, want *CorruptError that moved nothing", err)
			}
			if b, err := os.ReadFile(st.Path()); err != nil || string(b) != tc.content {
				t.Fatalf("file changed: %q %v", b, err)
			}
			if after := dirNames(t, filepath.Dir(st.Path())); after != before {
				t.Fatalf("directory changed by a read: %s -> %s", before, after)
			}
		})
		t.Run(tc.name+" is moved aside by a recorder save", func(t *testing.T) {
			st := Open(t.TempDir())
			os.MkdirAll(filepath.Dir(st.Path()), 0o755)
			os.WriteFile(st.Path(), []byte(tc.content), 0o644)
			var moved *CorruptError
			err := st.update(ctx, func(cur *Swarm) (*Swarm, error) { return newTestSwarm("a"), nil }, func(c *CorruptError) { moved = c })
			if tc.name == "wrong type" {
				// a JSON object with a field of the wrong type is not moved
				if err == nil || moved != nil || !strings.Contains(err.Error(), "containers") {
					t.Fatalf("save over a file with a bad field = %v (moved %v)", err, moved)
				}
				return
			}
			if err != nil || moved == nil || !strings.Contains(moved.MovedTo, StateFileName+".corrupt-") {
				t.Fatalf("save over a corrupt file = %v (moved %v)", err, moved)
			}
			if b, err := os.ReadFile(moved.MovedTo); err != nil || string(b) != tc.content {
				t.Fatalf("corrupt content not kept: %q %v", b, err)
			}
		})
	}
}

// storeUpdateCases are TestStoreLoadSave's subtests of Update.
func storeUpdateCases(t *testing.T, ctx context.Context) {
	t.Run("update keeps edits made in between", func(t *testing.T) {
		st := Open(t.TempDir())
		st.Save(ctx, newTestSwarm("a"))
		// another tool adds a container
		other := Open(st.Root())
		other.Update(ctx, func(s *Swarm) error {
			s.Containers = append(s.Containers, newTestContainer(1, "b"))
			return nil
		})
		if err := st.Update(ctx, func(s *Swarm) error { s.Containers[0].Status = StatusRunning; return nil }); err != nil {
			t.Fatal(err)
		}
		got, _ := st.Load(ctx)
		if len(got.Containers) != 2 || got.Containers[0].Status != StatusRunning {
			t.Fatalf("got %+v", got.Containers)
		}
	})
	t.Run("update on a missing file is ErrNoState and writes nothing", func(t *testing.T) {
		st := Open(t.TempDir())
		called := false
		if err := st.Update(ctx, func(*Swarm) error { called = true; return nil }); !errors.Is(err, ErrNoState) || called {
			t.Fatalf("Update = %v, called %v", err, called)
		}
	})
	t.Run("update whose function fails writes nothing", func(t *testing.T) {
		st := Open(t.TempDir())
		st.Save(ctx, newTestSwarm("a"))
		boom := errors.New("boom")
		err := st.Update(ctx, func(s *Swarm) error { s.Containers = nil; return boom })
		got, _ := st.Load(ctx)
		if !errors.Is(err, boom) || len(got.Containers) != 1 {
			t.Fatalf("Update = %v, file has %d containers", err, len(got.Containers))
		}
	})
}

// storeUpkeepCases are TestStoreLoadSave's subtests of removing the file, the
// stale temp files of a killed writer and the lock.
func storeUpkeepCases(t *testing.T, ctx context.Context) {
	t.Run("remove deletes the file and tolerates a missing one", func(t *testing.T) {
		st := Open(t.TempDir())
		st.Save(ctx, newTestSwarm("a"))
		if err := st.Remove(ctx); err != nil {
			t.Fatal(err)
		}
		if err := st.Remove(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Load(ctx); !errors.Is(err, ErrNoState) {
			t.Fatalf("Load after Remove = %v", err)
		}
	})
	t.Run("stale temp files of a killed writer are removed", func(t *testing.T) {
		st := Open(t.TempDir())
		os.MkdirAll(filepath.Dir(st.Path()), 0o755)
		stale := filepath.Join(filepath.Dir(st.Path()), atomicfile.TempPrefix(st.Path())+"123")
		os.WriteFile(stale, []byte(`{"swarm`), 0o600)
		st.Save(ctx, newTestSwarm("a"))
		if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stale temp file still there: %v", err)
		}
	})
	t.Run("lock wait honours the context", func(t *testing.T) {
		st := Open(t.TempDir())
		held := make(chan struct{})
		release := make(chan struct{})
		go st.withLock(ctx, func() error { close(held); <-release; return nil })
		<-held
		defer close(release)
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := st.Save(cctx, newTestSwarm("a")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Save with the lock held = %v", err)
		}
	})
}

func TestUpdateToleratesForeignInvalidEntriesItDoesNotChange(t *testing.T) {
	ctx := context.Background()
	st := Open(t.TempDir())
	st.Save(ctx, newTestSwarm("mine"))
	// a shell tool adds an entry without an engine id (out of schema)
	b, _ := os.ReadFile(st.Path())
	foreign := `{"containerId":"","containerName":"theirs","taskFilePath":"t.json","branchName":"feat/t","status":"pending","storyProgress":{"total":0,"completed":0,"failed":0,"inProgress":0,"pending":0},"createdAt":"2026-11-22T10:31:00Z","updatedAt":"2026-11-22T10:31:00Z"}`
	os.WriteFile(st.Path(), []byte(strings.Replace(string(b), `"containers": [`, `"containers": [`+foreign+`,`, 1)), 0o644)
	if err := st.Update(ctx, func(s *Swarm) error { s.Container("mine").Status = StatusRunning; return nil }); err != nil {
		t.Fatalf("update of my entry: %v", err)
	}
	if err := st.Update(ctx, func(s *Swarm) error { s.Container("theirs").Status = StatusRunning; return nil }); err == nil {
		t.Fatal("an update that changes the invalid entry was saved")
	}
	sw, _ := st.Load(ctx)
	if len(sw.Containers) != 2 || sw.Container("mine").Status != StatusRunning {
		t.Fatalf("after update: %+v", sw.Containers)
	}
}

// dirNames lists a directory's entries, for "nothing was moved" checks.
func dirNames(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// shellToolState is a state file as the aimi shell tools write it with jq
// and shell variables: numbers as strings, an unset prUrl as "".
const shellToolState = `{
  "swarmId": "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b",
  "createdAt": "2026-11-22T10:31:00Z",
  "updatedAt": "2026-11-22T10:31:00Z",
  "containers": [
    {
      "containerId": "abc000abc000",
      "containerName": "aimi-a",
      "taskFilePath": ".aimi/tasks/a-tasks.json",
      "branchName": "feat/a",
      "status": "running",
      "prUrl": "",
      "storyProgress": {"total": "4", "completed": "1", "failed": 0, "inProgress": "1", "pending": "2"},
      "createdAt": "2026-11-22T10:31:00Z",
      "updatedAt": "2026-11-22T10:31:00Z",
      "acpPid": "12"
    }
  ]
}
`

func TestLoadReadsTheShellToolsLooseTypes(t *testing.T) {
	ctx := context.Background()
	st := Open(t.TempDir())
	os.MkdirAll(filepath.Dir(st.Path()), 0o755)
	os.WriteFile(st.Path(), []byte(shellToolState), 0o644)
	sw, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := sw.Container("aimi-a")
	if c == nil || c.ACPPID == nil || *c.ACPPID != 12 || c.PRURL != nil ||
		c.StoryProgress != (Progress{Total: 4, Completed: 1, InProgress: 1, Pending: 2}) {
		t.Fatalf("read %+v", c)
	}
	if b, _ := os.ReadFile(st.Path()); string(b) != shellToolState {
		t.Fatal("a read changed the file")
	}
}

func TestLoadNamesTheFieldItCannotAccept(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ old, new, field string }{
		{`"acpPid": "12"`, `"acpPid": "twelve"`, `containers[0].acpPid: "twelve" is not an integer`},
		{`"pending": "2"`, `"pending": [2]`, `containers[0].storyProgress.pending`},
		{`"status": "running"`, `"status": 3`, `containers[0].status`},
		{`"createdAt": "2026-11-22T10:31:00Z",
      "updatedAt"`, `"createdAt": "yesterday",
      "updatedAt"`, `containers[0].createdAt`},
	} {
		st := Open(t.TempDir())
		os.MkdirAll(filepath.Dir(st.Path()), 0o755)
		content := strings.Replace(shellToolState, tc.old, tc.new, 1)
		if content == shellToolState {
			t.Fatalf("mutation %q not applicable", tc.old)
		}
		os.WriteFile(st.Path(), []byte(content), 0o644)
		_, err := st.Load(ctx)
		var cerr *CorruptError
		if !errors.As(err, &cerr) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Load = %v, want an error naming %s", err, tc.field)
		}
		if b, _ := os.ReadFile(st.Path()); string(b) != content {
			t.Errorf("%s: a read changed the file", tc.field)
		}
	}
}

func TestIsDaemonFile(t *testing.T) {
	for p, want := range map[string]bool{
		".aimi/swarm-state.json":                    true,
		".aimi/swarm-state.json.lock":               true,
		".aimi/swarm/s1/aimi-a.ndjson":              true,
		".aimi/swarm-state.json.corrupt-2026-12-07": true,
		".aimi/tasks/a-tasks.json":                  false,
		".aimi/swarmish":                            false,
		"src/.aimi/swarm-state.json":                false,
		"swarm-state.json":                          false,
	} {
		if got := IsDaemonFile(p); got != want {
			t.Errorf("IsDaemonFile(%q) = %v, want %v", p, got, want)
		}
	}
}
