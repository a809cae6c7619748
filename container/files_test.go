package container

import (
	"archive/tar"
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestReadRegular(t *testing.T) {
	archive := func(entries ...tar.Header) *bytes.Buffer {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, h := range entries {
			h.Mode = 0o644
			if err := tw.WriteHeader(&h); err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				tw.Write([]byte(strings.Repeat("x", int(h.Size))))
			}
		}
		tw.Close()
		return &buf
	}
	for _, tc := range []struct {
		name      string
		in        *bytes.Buffer
		want      string
		found, ok bool
	}{
		{"regular file", archive(tar.Header{Name: "f", Size: 3, Typeflag: tar.TypeReg}), "xxx", true, true},
		{"a directory is no file", archive(tar.Header{Name: "d", Typeflag: tar.TypeDir}, tar.Header{Name: "d/f", Size: 1, Typeflag: tar.TypeReg}), "", false, false},
		{"a symlink is no file", archive(tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}), "", false, false},
		{"empty stream", archive(), "", false, true},
		{"at the bound", archive(tar.Header{Name: "f", Size: 8, Typeflag: tar.TypeReg}), "xxxxxxxx", true, true},
		{"over the bound", archive(tar.Header{Name: "f", Size: 9, Typeflag: tar.TypeReg}), "", false, false},
		{"not a tar stream", bytes.NewBufferString("garbage"), "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, found, err := readRegular(tc.in, 8, "f", "aimi-x")
			if string(data) != tc.want || found != tc.found || (err == nil) != tc.ok {
				t.Fatalf("readRegular = %q, %v, %v; want %q, %v (ok %v)", data, found, err, tc.want, tc.found, tc.ok)
			}
		})
	}
}

func TestStorageOptRefused(t *testing.T) {
	for msg, want := range map[string]bool{
		"Error response from daemon: --storage-opt is not supported":                      true,
		"--storage-opt is supported only for overlay over xfs with 'pquota' mount option": true,
		"Storage Option not supported":                                                    true,
		"No such image: aimi-sandbox:x":                                                   false,
		"Conflict. The container name \"/aimi-x\" is already in use by container":         false,
	} {
		if got := storageOptRefused(errors.New(msg)); got != want {
			t.Errorf("storageOptRefused(%q) = %v, want %v", msg, got, want)
		}
	}
	if storageOptRefused(nil) {
		t.Error("storageOptRefused(nil) = true")
	}
}
