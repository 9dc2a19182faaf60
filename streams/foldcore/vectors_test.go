package foldcore

import (
	"bufio"
	"os"
	"testing"
)

// vectorLines reads the vector file the environment variable `env` names, line by line, and
// skips the test when it is unset: the differential tests need files the Python fold writes,
// which CI does not make (tests/unit/test_fold_core.py compares the two folds there).
func vectorLines(t *testing.T, env string) *bufio.Scanner {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		t.Skip(env + " not set")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	return sc
}
