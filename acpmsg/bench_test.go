package acpmsg

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// benchLines is a realistic stream: mostly progress updates with summaries of
// a few hundred characters, some task-requests, completions and errors.
func benchLines(b *testing.B) [][]byte {
	b.Helper()
	const env = `"timestamp":"2026-03-01T10:00:00.123Z","swarmId":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","containerId":"3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e"`
	summary := strings.Repeat("Migration created and applied; tests pass. ", 6)
	var lines [][]byte
	for i := range 16 {
		var l string
		switch {
		case i == 0:
			l = `{"type":"task-request",` + env + `,"payload":{"taskFilePath":".aimi/tasks/2026-03-01-feature-tasks.json","branchName":"feat/my-feature","repoUrl":"https://github.com/org/repo.git","envVars":{"NODE_ENV":"development","AIMI_AGENT":"claude"}}}`
		case i == 14:
			l = `{"type":"completion",` + env + `,"payload":{"status":"completed","prUrl":"https://github.com/org/repo/pull/42","errors":["US-003: typecheck failed"]}}`
		case i == 15:
			l = `{"type":"error",` + env + `,"payload":{"code":"CONTAINER_OOM","message":"Container exceeded memory limit (4GB). Process killed by OOM killer."}}`
		case i%2 == 1:
			l = fmt.Sprintf(`{"type":"progress-update",%s,"payload":{"storyId":"US-%03d","status":"in_progress","output":"Starting story: add the status column"}}`, env, i)
		default:
			l = fmt.Sprintf(`{"type":"progress-update",%s,"payload":{"storyId":"US-%03d","status":"completed","output":%q}}`, env, i, summary)
		}
		lines = append(lines, []byte(l))
	}
	return lines
}

func BenchmarkDecodeValidate(b *testing.B) {
	lines := benchLines(b)
	var size int
	for _, l := range lines {
		size += len(l) + 1
	}
	b.ReportAllocs()
	n := 0
	cpu0 := cpuTime()
	for b.Loop() {
		for _, l := range lines {
			if _, err := Parse(l); err != nil {
				b.Fatal(err)
			}
		}
		n++
	}
	cpu := (cpuTime() - cpu0).Seconds()
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(n*len(lines))/secs, "msgs/s")
	b.ReportMetric(float64(n*size)/secs/1e6, "MB/s")
	if cpu > 0 {
		// Per CPU-second (GC included): the one-core figure on a busy host.
		b.ReportMetric(float64(n*len(lines))/cpu, "msgs/cpu-s")
		b.ReportMetric(float64(n*size)/cpu/1e6, "MB/cpu-s")
	}
	b.ReportMetric(0, "ns/op")
}

func BenchmarkReader(b *testing.B) {
	lines := benchLines(b)
	stream := append(bytes.Join(lines, []byte("\n")), '\n')
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		r := NewReader(bytes.NewReader(stream))
		for {
			l, err := r.Next()
			if err != nil {
				break
			}
			if l.Err != nil {
				b.Fatal(l.Err)
			}
		}
		n++
	}
	b.ReportMetric(float64(n*len(lines))/b.Elapsed().Seconds(), "msgs/s")
}
