package foldcore

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func replayLines(lines [][]byte, window int) ([]byte, Stats, error) {
	var in, out bytes.Buffer
	for _, line := range lines {
		in.Write(line)
		in.WriteByte('\n')
	}
	stats, err := Replay(&in, &out, ReplayOptions{WindowBytes: window})
	return out.Bytes(), stats, err
}

// asBarrier writes the line's first "uid" key with an escape: the same event, whose pod the
// window cannot read off its bytes.
func asBarrier(line []byte) []byte {
	return bytes.Replace(line, []byte(`"uid"`), []byte(`"\u0075id"`), 1)
}

func TestReplayFoldsPodByPodWithTheHistoryOfInputOrder(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var lines [][]byte
		barriers, escaped := 0, 0
		for _, line := range syntheticEvents(rng, 12, 1500) {
			switch rng.IntN(40) {
			case 0:
				lines = append(lines, []byte(" \t"))
			case 1:
				line = asBarrier(line)
				barriers++
			case 2, 3: // an escape that is no barrier: a quote in a message
				if quoted := bytes.Replace(line, []byte(`"message":"`), []byte(`"message":"say \"hi\" `), 1); len(quoted) > len(line) {
					line = quoted
					escaped++
				}
			}
			lines = append(lines, line)
		}
		if barriers == 0 || escaped == 0 {
			t.Fatalf("%d barrier lines, %d escaped: the test covers less than it says", barriers, escaped)
		}
		want, wantStats := foldForTest(t, lines, true)
		for _, window := range []int{1, 4 << 10, 64 << 10, 0} {
			got, stats, err := replayLines(lines, window)
			if err != nil {
				t.Fatalf("seed %d, window %d: %v", seed, window, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("seed %d, window %d: the history differs from the input order's", seed, window)
			}
			if stats != wantStats {
				t.Fatalf("seed %d, window %d: stats %+v, want %+v", seed, window, stats, wantStats)
			}
		}
	}
}

func TestReplayFoldsPodsApartWhoseEventsInterleave(t *testing.T) {
	// Pod a's events come before and after pod b's: a's chain folds first, yet b's versions are
	// written where b's lines were. (The probes change nothing: the pods have no readiness probe.)
	lines := [][]byte{
		[]byte(podUpdate("ADD", podA, 1_700_000_000_000)),
		[]byte(podUpdate("ADD", podB, 1_700_000_000_100)),
		[]byte(pleg("b", "running", 1_700_000_001_000)),
		[]byte(pleg("a", "running", 1_700_000_002_000)),
		[]byte(probe("b", "Success", 1_700_000_003_000)),
		[]byte(probe("a", "Success", 1_700_000_004_000)),
	}
	want, _ := foldForTest(t, lines, true)
	got, _, err := replayLines(lines, 0)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("err %v; history\n%s\nwant\n%s", err, got, want)
	}
	uids := []string{}
	for _, line := range bytes.Split(bytes.TrimSpace(got), []byte("\n")) {
		uids = append(uids, string(line[len(`{"uid":"`):len(`{"uid":"`)+1]))
	}
	if strings.Join(uids, "") != "abba" {
		t.Fatalf("versions of pods %s, want abba (input order)", strings.Join(uids, ""))
	}
}

func TestReplayNamesTheEarliestLineItDoesNotCover(t *testing.T) {
	float := func(line string) []byte { return []byte(strings.Replace(line, `"ts_ms":`, `"ts_ms":0.5,"x":`, 1)) }
	ok := func(line string) []byte { return []byte(line) }
	addA, addB := podUpdate("ADD", podA, 1_700_000_000_000), podUpdate("ADD", podB, 1_700_000_000_000)
	for name, c := range map[string]struct {
		lines  [][]byte
		window int
		line   int64
	}{
		// a's chain (1, 4, 5) folds first and stops at 5; b's (2, 3) stops at 3, the earlier.
		"in a chain folded later": {[][]byte{ok(addA), ok(addB), float(probe("b", "Success", 2)), ok(probe("a", "Success", 3)), float(probe("a", "Failure", 4))}, 0, 3},
		"a barrier":               {[][]byte{ok(addA), ok(probe("a", "Success", 2)), []byte("{not json"), float(probe("a", "Failure", 4))}, 0, 3},
		"before a barrier":        {[][]byte{ok(addA), float(probe("a", "Success", 2)), asBarrier(ok(probe("a", "Failure", 3)))}, 0, 2},
		"an event held":           {[][]byte{ok(addA), ok(probe("b", "Success", 2)), ok(probe("a", "Success", 3))}, 0, 2},
		"in a later window":       {[][]byte{ok(addA), ok(probe("a", "Success", 2)), float(probe("a", "Failure", 3))}, 1, 3},
	} {
		_, _, err := replayLines(c.lines, c.window)
		var gaveUp *GaveUp
		if !errors.As(err, &gaveUp) || gaveUp.Line != c.line {
			t.Errorf("%s: %v, want a give-up at line %d", name, err, c.line)
		}
	}
}

func TestPodKey(t *testing.T) {
	for line, want := range map[string]string{
		`{"uid":"u1","node":"n"}`:                      "u1",
		`{"op":"ADD","pod":{"metadata":{"uid":"u2"}}}`: "u2",
		`{"uid" : "u3"}`:                               "u3",
		"{\"uid\"\t:\n\"u4\"}":                         "u4",
		`{"fluid":"x","uid":"u5"}`:                     "u5",
		`{"uid":"u1","labels":{"uid":"u1"}}`:           "",   // twice: which one decodes is not sure
		`{"\u0075id":"u1"}`:                            "",   // a \u escape: the key may be written otherwise
		`{"uid":"u1","name":"a\"b"}`:                   "u1", // an escaped quote spells no key
		`{"uid":"u1","note":"x\"uid"}`:                 "",   // a value ending in "uid: as good as twice
		`{"uid":"u\"1"}`:                               "",   // an escape in the uid itself
		`{"uid":"u1","name":"\u0061"}`:                 "",   // any \u escape
		`{"node":"n"}`:                                 "",
		`{"uid":5}`:                                    "",
		`{"uid":"u1`:                                   "",
		`{"uid"}`:                                      "",
	} {
		key, ok := podKey([]byte(line))
		if got := string(key); ok != (want != "") || got != want {
			t.Errorf("podKey(%s) = %q, %v; want %q", line, got, ok, want)
		}
	}
}

func TestReplayFoldsALineLongerThanItsReadBuffer(t *testing.T) {
	// A pod announced with a 1.5 MB annotation: the line comes in pieces, and crosses a window.
	rng := rand.New(rand.NewPCG(5, 7))
	lines := syntheticEvents(rng, 4, 300)
	long := -1
	for i, line := range lines {
		if bytes.Contains(line, []byte(`"op":"ADD"`)) && i > 0 {
			lines[i] = bytes.Replace(line, []byte(`"metadata":{`),
				[]byte(`"metadata":{"annotations":{"note":"`+strings.Repeat("x", 3<<19)+`"},`), 1)
			long = i
			break
		}
	}
	if long < 0 || len(lines[long]) < 3<<19 {
		t.Fatal("no long line made")
	}
	want, wantStats := foldForTest(t, lines, true)
	for _, window := range []int{1, 1 << 20, 0} {
		got, stats, err := replayLines(lines, window)
		if err != nil || !bytes.Equal(got, want) || stats != wantStats {
			t.Fatalf("window %d: %v, %+v (want %+v), history equal: %v", window, err, stats, wantStats, bytes.Equal(got, want))
		}
	}
}
