package tasks

import "fmt"

// BranchTaken is the problem of a task file whose metadata.branchName is
// also that of another task file run beside it. Each container pushes its
// own branch; a second container on the same branch has its pushes refused
// (or overwrites the first one's work), while it may still report success.
func BranchTaken(branch, file, other string) Problem {
	return Problem{Field: "metadata.branchName",
		Error: fmt.Sprintf("Invalid tasks.json - %s and %s both name the branch %q; two task files cannot run on one branch.", other, file, branch),
		Fix:   fmt.Sprintf("Give %s its own metadata.branchName (or merge the two task files into one).", file)}
}
