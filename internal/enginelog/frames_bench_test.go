package enginelog

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/aimi-tools/swarm/engine"
)

// BenchmarkFrameSplitter measures turning engine log frames into lines: the
// per-line cost every container's output pays. Target: well over 1M
// lines/s per core, so reading never limits a chatty agent.
func BenchmarkFrameSplitter(b *testing.B) {
	var stream bytes.Buffer
	const n = 10000
	for i := range n {
		stream.Write(frame(engine.Stdout, at(i/3), fmt.Sprintf(`{"type":"progress-update","storyId":"S-%d","status":"in_progress"}`+"\n", i)))
	}
	data := stream.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	lines := 0
	for b.Loop() {
		fs := newFrameSplitter(engine.MaxLineBytes, func(engine.Line) bool { lines++; return true })
		if err := fs.readFrom(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(lines)/b.Elapsed().Seconds(), "lines/s")
}
