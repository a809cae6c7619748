package orchestrator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/aimi-tools/swarm/tasks"
)

// A start of N task files reads them all as loadAsRun does, but with two
// git processes whatever N is, where loadAsRun takes up to four per file
// (on a loaded 2-core machine, 8 files took 50 ms that way):
//
//  1. git cat-file --batch-check answers, for every file, whether each
//     revision it may start from (sourceCandidates) is a commit, and the
//     object and size of the file there;
//  2. git cat-file --batch reads, in each chosen commit, the tree that
//     holds the file (for its mode, which tells a symbolic link or a
//     submodule from a file, as git ls-tree does) and the file's blob, only
//     when it is a blob of at most tasks.MaxFileBytes: a larger one is
//     refused from its size without being read.
//
// Both processes start before the working-tree copies are parsed, so that
// their start overlaps that work.
//
// When a batch fails as a whole (not a repository, a directory git refuses
// to read, a git that stops), every file is read again on its own by
// loadAsRun, so that each message says why exactly as it always did.

// batchFile is one task file on its way through the batches.
type batchFile struct {
	i      int // index in the caller's list
	path   string
	wtData []byte
	wt     *tasks.File
	cands  []source
	src    source
	commit string  // object id of src
	entry  objInfo // what src holds at path, as batch 1 saw it
	err    error   // of containerSource, when no candidate is a commit
}

// objInfo is an answer of git cat-file: ok false when the object is missing.
type objInfo struct {
	ok             bool
	oid, typ, size string
}

// treeEntry is an entry of a tree object: its mode as git ls-tree prints it.
type treeEntry struct{ mode, oid string }

// batchFormat is the header of every answer of both batches.
const batchFormat = "%(objectname) %(objecttype) %(objectsize)"

// loadAllAsRun reads every task file as its container will run it
// (loadAsRun) in a constant number of git processes (see the comment at the
// top of this file). A malformed path is not read; one named twice, or
// already in the swarm, is read anyway and refused by the caller before its
// result is used.
func loadAllAsRun(ctx context.Context, repo string, files []string, local bool) []loadedTask {
	out := make([]loadedTask, len(files))
	if !slices.ContainsFunc(files, func(p string) bool { return checkTaskPath(p) == nil }) {
		return out
	}
	// Both start now, while the working-tree copies are parsed.
	check, blobs, startErr := startBatches(ctx, repo)
	read := make([]*batchFile, len(files))
	var alone []int
	var g errgroup.Group
	g.SetLimit(loadConcurrency) // parsing is most of the time left
	for i, p := range files {
		if checkTaskPath(p) != nil {
			continue
		}
		if strings.ContainsAny(p, "\n\r") { // would break the batches' lines
			alone = append(alone, i)
			continue
		}
		g.Go(func() error {
			wtData, wt, err := readWorkingCopy(repo, p)
			if err != nil {
				out[i].err = err
				return nil
			}
			read[i] = &batchFile{i: i, path: p, wtData: wtData, wt: wt, cands: sourceCandidates(wt.Metadata.BranchName, local)}
			return nil
		})
	}
	_ = g.Wait()
	var batch []*batchFile
	for _, f := range read {
		if f != nil {
			batch = append(batch, f)
		}
	}
	if err := errors.Join(startErr, loadBatch(check, blobs, batch, local, out)); err != nil {
		for _, f := range batch {
			alone = append(alone, f.i)
		}
	}
	loadEachAsRun(ctx, repo, files, alone, local, out)
	return out
}

// startBatches starts the git processes of both batches.
func startBatches(ctx context.Context, repo string) (check, blobs *catFile, err error) {
	if check, err = startCatFile(ctx, repo, "--batch-check="+batchFormat); err != nil {
		return nil, nil, err
	}
	if blobs, err = startCatFile(ctx, repo, "--batch="+batchFormat); err != nil {
		check.answer(nil, nil)
		return nil, nil, err
	}
	return check, blobs, nil
}

// loadBatch fills out for every file of batch, or fails as a whole. It
// ends both git processes (none when they did not start).
func loadBatch(check, blobGit *catFile, batch []*batchFile, local bool, out []loadedTask) error {
	if check == nil {
		return errors.New("git cat-file did not start")
	}
	if err := resolveSources(check, batch, local); err != nil {
		blobGit.answer(nil, nil)
		return err
	}
	trees, blobs, err := readTreesAndBlobs(blobGit, batch)
	if err != nil {
		return err
	}
	for _, f := range batch {
		if f.err != nil {
			out[f.i].err = f.err
			continue
		}
		data, err := committedFromBatch(f, trees, blobs)
		out[f.i].tf, out[f.i].err = judgeCommitted(f.path, f.wtData, f.wt, f.src, data, err)
	}
	return nil
}

// loadConcurrency bounds the task files read from git at once when they
// are read one by one.
const loadConcurrency = 8

type loadedTask struct {
	tf  *tasks.File
	err error
}

// loadEachAsRun reads the task files files[i] of which (by loadAsRun),
// several at once.
func loadEachAsRun(ctx context.Context, repo string, files []string, which []int, local bool, out []loadedTask) {
	var g errgroup.Group
	g.SetLimit(loadConcurrency)
	for _, i := range which {
		g.Go(func() error {
			tf, err := loadAsRun(ctx, repo, files[i], local)
			out[i] = loadedTask{tf, err}
			return nil
		})
	}
	_ = g.Wait()
}

// resolveSources picks each file's source, as containerSource does, and
// notes what the source holds at the file's path: batch 1.
func resolveSources(git *catFile, batch []*batchFile, local bool) error {
	var queries []string
	for _, f := range batch {
		for _, c := range f.cands {
			queries = append(queries, c.rev+"^{commit}", c.rev+"^{commit}:"+f.path)
		}
	}
	queries = unique(queries)
	info := make(map[string]objInfo, len(queries))
	err := git.answer(queries, func(q, header string, _ *bufio.Reader) error {
		o, err := parseHeader(q, header)
		info[q] = o
		return err
	})
	if err != nil {
		return err
	}
	for _, f := range batch {
		f.err = errNoCommit(local)
		for _, c := range f.cands {
			if o := info[c.rev+"^{commit}"]; o.ok && o.typ == "commit" {
				f.src, f.commit, f.entry, f.err = c, o.oid, info[c.rev+"^{commit}:"+f.path], nil
				break
			}
		}
	}
	return nil
}

// treeQuery names the tree that holds f's path in its source.
func treeQuery(f *batchFile) string {
	dir := path.Dir(f.path)
	if dir == "." {
		dir = ""
	}
	return f.commit + ":" + dir
}

// readTreesAndBlobs reads, for every file with a source, the tree that
// holds it (keeping only the entries of the files) and its blob when batch
// 1 found one within the bound: batch 2. Trees are by treeQuery, then by
// name; blobs by object id.
func readTreesAndBlobs(git *catFile, batch []*batchFile) (map[string]map[string]treeEntry, map[string][]byte, error) {
	want := map[string]map[string]bool{} // tree query -> names in it
	var queries []string
	for _, f := range batch {
		if f.err != nil {
			continue
		}
		tq := treeQuery(f)
		if want[tq] == nil {
			want[tq] = map[string]bool{}
			queries = append(queries, tq)
		}
		want[tq][path.Base(f.path)] = true
		if withinBound(f.entry) {
			queries = append(queries, f.entry.oid)
		}
	}
	queries = unique(queries)
	trees, blobs := map[string]map[string]treeEntry{}, map[string][]byte{}
	err := git.answer(queries, func(q, header string, r *bufio.Reader) error {
		o, err := parseHeader(q, header)
		if err != nil || !o.ok {
			return err
		}
		size, err := strconv.ParseInt(o.size, 10, 64)
		if err != nil {
			return fmt.Errorf("unexpected git cat-file answer %q", cutText(header, 200))
		}
		body := io.LimitReader(r, size)
		switch {
		case want[q] != nil && o.typ == "tree":
			trees[q], err = treeEntries(body, len(o.oid)/2, want[q])
		case want[q] == nil && o.typ == "blob" && size <= tasks.MaxFileBytes:
			blobs[q] = make([]byte, size)
			_, err = io.ReadFull(body, blobs[q])
		}
		if err == nil {
			_, err = io.Copy(io.Discard, body) // what was not wanted: a path's directory that is a file
		}
		if err == nil {
			err = expectByte(r, '\n')
		}
		return err
	})
	return trees, blobs, err
}

// withinBound: o is a blob small enough to be read.
func withinBound(o objInfo) bool {
	n, err := strconv.ParseInt(o.size, 10, 64)
	return o.ok && o.typ == "blob" && err == nil && n <= tasks.MaxFileBytes
}

// committedFromBatch is readCommitted's answer for f from the batches.
func committedFromBatch(f *batchFile, trees map[string]map[string]treeEntry, blobs map[string][]byte) ([]byte, error) {
	e, found := trees[treeQuery(f)][path.Base(f.path)]
	if !found {
		return nil, errNoRev
	}
	typ, size := "blob", "-"
	switch e.mode {
	case "040000":
		typ = "tree"
	case "160000":
		typ = "commit"
	}
	if typ == "blob" {
		if !f.entry.ok || f.entry.oid != e.oid {
			// The source moved between the batches (a commit meanwhile).
			return nil, fmt.Errorf("it changed in git while it was read; start again")
		}
		size = f.entry.size
	}
	if err := checkEntry(e.mode, typ, size); err != nil {
		return nil, err
	}
	data, ok := blobs[e.oid]
	if !ok {
		return nil, fmt.Errorf("git cat-file did not return the object %s", e.oid)
	}
	return data, nil
}
