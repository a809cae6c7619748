// Command stubrunner stands in for acp-runner in the sandbox image tests
// while (or where) the real one does not build: it answers --help and
// prints its environment's user, so the tests can check the image's config.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "--help" || os.Args[1] == "-h") {
		fmt.Println("usage: acp-runner (stub): reads a task-request on stdin")
		return
	}
	wd, _ := os.Getwd()
	fmt.Printf("uid=%d home=%s wd=%s\n", os.Getuid(), os.Getenv("HOME"), wd)
}
