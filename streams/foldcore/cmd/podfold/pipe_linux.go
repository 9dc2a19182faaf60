//go:build linux

package main

import (
	"os"
	"syscall"
)

// pipeBytes is the pipe size the core asks for: the most an unprivileged process may have unless
// /proc/sys/fs/pipe-max-size says otherwise.
const pipeBytes = 1 << 20

// widenPipe asks for a pipe of pipeBytes behind f, when f is a pipe. Pipes hold 64 KiB by default:
// a batch's request (about 1.5 KB an input) would come over in slices, each waiting for the core
// to be scheduled, and an answer of a few megabytes would go to the fold worker in slices, each
// waiting for the worker's event loop to come round (widening the answers' pipe: a tenth more
// batches folded a second). Anything else (a file, a terminal, a lower limit) stays as it is.
func widenPipe(f *os.File) {
	info, err := f.Stat()
	if err != nil || info.Mode()&os.ModeNamedPipe == 0 {
		return
	}
	const setPipeSize = 1031 // F_SETPIPE_SZ
	_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), setPipeSize, pipeBytes)
}
