package gitref

import (
	"errors"
	"os"
	"strings"
)

// sharedIndexPrefix begins the name of a split index's shared part in a
// git directory (git's Documentation/technical/split-index.txt).
const sharedIndexPrefix = "sharedindex."

// SharedIndexFile is the name of the shared part whose hex is h.
func SharedIndexFile(h string) string { return sharedIndexPrefix + h }

// SharedIndex is the hex of the one split index's shared part
// (sharedindex.<hex>, a regular file) in gitDir.
func SharedIndex(gitDir string) (string, error) {
	ents, err := os.ReadDir(gitDir)
	if err != nil {
		return "", err
	}
	found := ""
	for _, e := range ents {
		h, ok := strings.CutPrefix(e.Name(), sharedIndexPrefix)
		if !ok || !ValidOID(h) || !e.Type().IsRegular() {
			continue
		}
		if found != "" {
			return "", errors.New("more than one shared index")
		}
		found = h
	}
	if found == "" {
		return "", errors.New("no shared index")
	}
	return found, nil
}
