package sandboximage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/aimi-tools/swarm/internal/atomicfile"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
)

// The final-image cache. Labels cannot identify the builder's images: every
// image built FROM a sandbox image inherits them, LabelKey included, so a
// lookup by label once tagged a user's derived image (entrypoint dockerd) as
// the sandbox image. The builder therefore records the ID of each final
// image it commits, in CacheDir/images/<content key>. An image ID is the
// digest of the image's config, which names every layer and the entrypoint:
// a derived image cannot have it.

// imagesDir holds one file per content key.
const imagesDir = "images"

var (
	imageIDRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	keyRe     = regexp.MustCompile(`^[0-9a-f]{16,128}$`)
)

// recordImage notes that this builder committed id for key.
func recordImage(cacheDir, key, id string) error {
	if !keyRe.MatchString(key) || !imageIDRe.MatchString(id) {
		return fmt.Errorf("record sandbox image: bad key %q or id %q (a build bug)", key, id)
	}
	dir := filepath.Join(cacheDir, imagesDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("record sandbox image: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, key), []byte(id+"\n"), 0o644); err != nil {
		return fmt.Errorf("record sandbox image: %w", err)
	}
	return nil
}

// recordedImage is the ID recorded for key, or "" when there is none (or
// the record is not an image ID: it is then rebuilt and rewritten).
func recordedImage(cacheDir, key string) string {
	if !keyRe.MatchString(key) {
		return ""
	}
	data, err := os.ReadFile(filepath.Join(cacheDir, imagesDir, key))
	if err != nil {
		return ""
	}
	id := string(bytes.TrimSpace(data))
	if !imageIDRe.MatchString(id) {
		return ""
	}
	return id
}

// isRecorded reports whether this builder committed id (for any key).
func isRecorded(cacheDir, id string) bool {
	ents, err := os.ReadDir(filepath.Join(cacheDir, imagesDir))
	if err != nil {
		return false
	}
	for _, e := range ents {
		if recordedImage(cacheDir, e.Name()) == id {
			return true
		}
	}
	return false
}

// cachedFinal is the builder's own final image for key when the engine
// still has it.
func cachedFinal(ctx context.Context, cli client.APIClient, cacheDir, key string) (string, bool, error) {
	id := recordedImage(cacheDir, key)
	if id == "" {
		return "", false, nil
	}
	insp, err := cli.ImageInspect(ctx, id)
	if errdefs.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("inspect cached sandbox image %s: %w", short(id), err)
	}
	// The ID pins the content; the label check only guards a record
	// written for another key by hand.
	if insp.ID != id || insp.Config == nil || insp.Config.Labels[LabelKey] != key {
		return "", false, nil
	}
	return id, true, nil
}
