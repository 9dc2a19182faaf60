package foldcore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// checkParsed checks that the recency list and fold.Records name the same pods, and that the
// bound holds but for the records the last batch used (at most used of them).
func checkParsed(t *testing.T, s *Server, used int) {
	t.Helper()
	if len(s.fold.Records) != s.parsed.len() || len(s.shapes) != s.parsed.len() {
		t.Fatalf("%d records, %d shapes, %d in the recency list", len(s.fold.Records), len(s.shapes), s.parsed.len())
	}
	n := 0
	for e := s.parsed.ring.next; e != nil && e != &s.parsed.ring; e = e.next {
		if _, ok := s.fold.Records[e.uid]; !ok || s.parsed.byUID[e.uid] != e {
			t.Fatalf("%s is in the recency list, not parsed", e.uid)
		}
		n++
	}
	if n != s.parsed.len() {
		t.Fatalf("the recency list links %d of its %d records", n, s.parsed.len())
	}
	if n > max(s.ParsedRecords, used) {
		t.Fatalf("%d records parsed, over the bound %d", n, s.ParsedRecords)
	}
}

func TestParsedRecordsOrder(t *testing.T) {
	p := newParsedRecords()
	var gone []string
	note := func(uid string) { gone = append(gone, uid) }
	p.startBatch()
	for _, uid := range []string{"a", "b", "c", "d"} {
		p.use(uid)
	}
	p.startBatch()
	p.use("b")
	p.use("a")
	p.drop("c")
	p.drop("x")
	p.evict(1, note) // a and b are the current batch's: only d goes
	if fmt.Sprint(gone) != "[d]" || p.len() != 2 {
		t.Fatalf("evicted %v, %d left", gone, p.len())
	}
	p.startBatch()
	p.use("e")
	p.evict(1, note) // b is the least recently used, then a
	if fmt.Sprint(gone) != "[d b a]" || p.len() != 1 || p.ring.next.uid != "e" || p.ring.prev.uid != "e" {
		t.Fatalf("evicted %v, %d left", gone, p.len())
	}
	p.startBatch()
	p.evict(0, note)
	if fmt.Sprint(gone) != "[d b a e]" || p.len() != 0 || p.ring.next != &p.ring {
		t.Fatalf("evicted %v, %d left", gone, p.len())
	}
}

// TestServeAnswersTheSameWhateverTheBound folds a workload with a few records kept parsed, none
// but the batch's, and all: the answers must be the same bytes, with records evicted and read
// again, loaded, dropped by give-ups, removed, and held for a pod not announced yet.
func TestServeAnswersTheSameWhateverTheBound(t *testing.T) {
	for seed := uint64(1); seed <= 2; seed++ {
		rng := rand.New(rand.NewPCG(seed, 17))
		lines := syntheticEvents(rng, 40, 1500)
		want, _ := foldForTest(t, lines, true)
		inputs := inputsOf(t, lines)
		// pod a's events, before and after its announcement, where they fall
		extra := []testInput{
			in(TopicPleg, 1_000_001, 1, pleg("a", "running", 1_700_000_000_001)),
			in(TopicPodUpdates, 1_000_002, 2, podUpdate("ADD", podA, 2)),
			in(TopicProbeResults, 1_000_003, 3, probe("a", "Success", 3)),
			in(TopicPleg, 1_000_004, 4, pleg("a", "exited", 1_700_000_000_004)),
		}
		for i, e := range extra {
			at := 100 + i*300 + rng.IntN(200)
			inputs = append(inputs[:at], append([]testInput{e}, inputs[at:]...)...)
		}

		bounds := []int{3, 0, 1 << 30}
		servers := make([]*Server, len(bounds))
		for i, b := range bounds {
			servers[i] = NewServer(DefaultMaxEventBytes)
			servers[i].ParsedRecords = b
		}
		stored := map[string][]byte{} // the records as the servers last gave them
		var got []byte
		evicted, gaveUp, held := false, 0, 0
		for start := 0; start < len(inputs); {
			end := min(len(inputs), start+1+rng.IntN(maxBatch))
			batch := inputs[start:end]
			if rng.IntN(15) == 0 { // an input the core gives up on, for a pod with a record
				bad := in(TopicPleg, 2_000_000, 5, pleg("u000", "running", 5)[:30]) // not JSON
				at := rng.IntN(len(batch) + 1)
				g := answerAll(t, servers, append(append(append([]testInput{}, batch[:at]...), bad), batch[at:]...), maxBatch)
				if g.ok {
					t.Fatalf("seed %d: folded a bad input", seed)
				}
				gaveUp++
				// Python folds that batch; the core loads what it dropped, as it was before.
				reload(t, servers, g.dropped, stored)
			}
			a := answerAll(t, servers, batch, end-start)
			if !a.ok {
				t.Fatalf("seed %d: gave up: %s", seed, a.reason)
			}
			for _, o := range a.outputs {
				if o.kind == outputVersion && o.key != "a" {
					got = append(append(got, o.value...), '\n')
				}
			}
			for _, c := range a.changed {
				stored[c.key] = c.record
				if bytes.Contains(c.record, []byte(`"pod":null`)) {
					held++
				}
			}
			if len(servers[2].fold.Records) > len(servers[0].fold.Records) {
				evicted = true
			}
			if rng.IntN(10) == 0 { // records loaded again, as after an expiry
				var keys []string
				for k := range stored {
					if rng.IntN(8) == 0 {
						keys = append(keys, k)
					}
				}
				reload(t, servers, keys, stored)
			}
			start = end
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: the served history differs from the offline fold's", seed)
		}
		if !evicted || gaveUp == 0 || held == 0 {
			t.Fatalf("seed %d: evicted %v, gave up %d times, held %d times", seed, evicted, gaveUp, held)
		}
	}
}

// maxBatch is the most inputs of a batch of TestServeAnswersTheSameWhateverTheBound.
const maxBatch = 40

// answerAll folds the batch on every server: the answers must be the same. used is the most
// records the last batch may leave parsed beyond the bound.
func answerAll(t *testing.T, servers []*Server, batch []testInput, used int) testAnswer {
	t.Helper()
	first := foldBatch(t, servers[0], batch)
	checkParsed(t, servers[0], used)
	checkRaw(t, servers[0])
	for i, s := range servers[1:] {
		if a, b := fmt.Sprint(foldBatch(t, s, batch)), fmt.Sprint(first); a != b {
			at := 0
			for at < min(len(a), len(b)) && a[at] == b[at] {
				at++
			}
			t.Fatalf("bound %d answers otherwise than bound %d, from byte %d of the answer:\n%.300s\n%.300s",
				s.ParsedRecords, servers[0].ParsedRecords, at, a[at:], b[at:])
		}
		checkParsed(t, servers[i+1], used)
		checkRaw(t, servers[i+1])
	}
	return first
}

// checkRaw checks that the JSON every parsed record keeps of its values (Record.raw) is what
// encoding them gives now, and that some record keeps some.
func checkRaw(t *testing.T, s *Server) {
	t.Helper()
	kept := 0
	for uid, r := range s.fold.Records {
		fresh := *r
		fresh.raw = [rawSlots][]byte{}
		got, want := appendRecord(nil, r, s.shapes[uid], nil), appendRecord(nil, &fresh, s.shapes[uid], nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("the record of %s as kept:\n%s\nas its values are:\n%s", uid, got, want)
		}
		for _, raw := range r.raw {
			if raw != nil {
				kept++
			}
		}
	}
	if len(s.fold.Records) > 0 && kept == 0 {
		t.Fatalf("none of %d parsed records keeps the JSON of a value", len(s.fold.Records))
	}
}

// reload loads the pods' records (nil: none) into every server.
func reload(t *testing.T, servers []*Server, keys []string, stored map[string][]byte) {
	t.Helper()
	records := make([][]byte, len(keys))
	for i, k := range keys {
		records[i] = stored[k]
	}
	for _, s := range servers {
		loadRecords(t, s, keys, records)
		checkParsed(t, s, maxBatch) // the last batch's records that are not loaded stay parsed
		for _, k := range keys {
			if _, parsed := s.fold.Records[k]; parsed {
				t.Fatalf("%s stays parsed after a load", k)
			}
		}
	}
}
