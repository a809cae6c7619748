package land

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkLand16: 16 clean branches (each adds a file of its own) landed
// by a train onto a fresh integration branch, next to 16 `git merge
// --no-edit` of the same branches in a plain checkout: the physical limit
// of the same merges. land-to-merge is the ratio (target: at most 2; no
// verify command, so neither side runs one).
func BenchmarkLand16(b *testing.B) {
	const n = 16
	t := &testing.T{}
	r := &repo{t: t, dir: b.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.write("main", map[string]string{"f": "one\n"})
	var bs []Branch
	for i := range n {
		bs = append(bs, r.branch(fmt.Sprintf("b%02d", i), map[string]string{fmt.Sprintf("b%02d.txt", i): "x\n"}))
	}
	ctx := context.Background()
	var landT, mergeT time.Duration
	round := 0
	for b.Loop() {
		round++
		tr := r.train()
		tr.Ref = fmt.Sprintf("refs/heads/aimi/land/bench%d", round)
		start := time.Now()
		for _, br := range bs {
			if res, err := tr.Land(ctx, br); err != nil || res.Outcome != Landed {
				b.Fatalf("land %s: %+v %v", br.Container, res, err)
			}
		}
		landT += time.Since(start)
		plain := fmt.Sprintf("plain%d", round)
		r.git("checkout", "-q", "-b", plain, "main")
		start = time.Now()
		for _, br := range bs {
			r.git("merge", "-q", "--no-edit", "--no-ff", br.Tip)
		}
		mergeT += time.Since(start)
		r.git("checkout", "-q", "main")
	}
	b.ReportMetric(landT.Seconds()/float64(round), "s-land-16")
	b.ReportMetric(mergeT.Seconds()/float64(round), "s-git-merge-16")
	b.ReportMetric(float64(landT)/float64(mergeT), "land-to-merge")
}
