package tasks

// SkippedBehindFailure lists, in file order, the skipped stories a new run
// reopens: those with a failed dependency, or with a dependency that is
// itself such a skipped story. They are what the executor skipped because a
// dependency failed (spec/tasks-v3.md); every new run retries the failed
// stories, so it runs these again too (skipped -> pending). A story skipped
// by hand whose dependency failed cannot be told apart in the file and is
// reopened as well. status holds the current statuses, as for Ready (nil:
// the file's own). The runner reopens them in its task file and the
// daemon's fold starts with them pending, by this one rule.
func (f *File) SkippedBehindFailure(status map[string]Status) []string {
	idx := make(map[string]int, len(f.UserStories))
	for i, s := range f.UserStories {
		idx[s.ID] = i
	}
	behind := make(map[string]bool)
	// Dependencies may come after their dependents in the file: go round
	// until nothing changes (at most one round per story of a chain).
	for changed := true; changed; {
		changed = false
		for _, s := range f.UserStories {
			if behind[s.ID] || effective(s, status) != Skipped {
				continue
			}
			for _, dep := range s.DependsOn {
				i, ok := idx[dep]
				if ok && (behind[dep] || effective(f.UserStories[i], status) == Failed) {
					behind[s.ID], changed = true, true
					break
				}
			}
		}
	}
	var out []string
	for _, s := range f.UserStories {
		if behind[s.ID] {
			out = append(out, s.ID)
			delete(behind, s.ID) // a repeated id is listed once
		}
	}
	return out
}
