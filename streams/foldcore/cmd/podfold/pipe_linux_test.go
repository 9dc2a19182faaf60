//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func pipeSize(t *testing.T, f *os.File) int {
	t.Helper()
	const getPipeSize = 1032 // F_GETPIPE_SZ
	n, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), getPipeSize, 0)
	if errno != 0 {
		t.Fatalf("F_GETPIPE_SZ: %v", errno)
	}
	return int(n)
}

func TestWidenPipeSizesAPipeAndLeavesAFile(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	before := pipeSize(t, w)
	widenPipe(w)
	limit, err := os.ReadFile("/proc/sys/fs/pipe-max-size")
	if err != nil {
		t.Fatal(err)
	}
	most, _ := strconv.Atoi(strings.TrimSpace(string(limit)))
	if want := pipeBytes; most >= want || os.Geteuid() == 0 {
		if got := pipeSize(t, r); got < want { // one pipe: its read end sees the new size
			t.Fatalf("pipe of %d bytes after widenPipe, want %d", got, want)
		}
	} else if got := pipeSize(t, w); got != before {
		t.Fatalf("a pipe the limit keeps at %d bytes became %d", before, got)
	}

	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	widenPipe(file) // not a pipe: nothing to do, and nothing fails
	if _, err := file.WriteString("ok"); err != nil {
		t.Fatal(err)
	}
}
