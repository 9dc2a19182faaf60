package foldcore

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// parseForTest parses a test input that is known to be supported JSON.
func parseForTest(t testing.TB, s string) any {
	t.Helper()
	v, err := Parse([]byte(s))
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return v
}

func TestParseEncodeRoundTrip(t *testing.T) {
	cases := []struct{ in, want string }{
		{`null`, `null`},
		{` true `, `true`},
		{"\t\r\n[ 1 , -2 ,0,-0 ]\n", `[1,-2,0,0]`},
		{`{"b":1,"a":{"c":[]},"d":{}}`, `{"b":1,"a":{"c":[]},"d":{}}`},
		{`"\u00e9\/\"\\\b\f\n\r\t\u0001\u001f\u007f\u2028"`, "\"\u00e9/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\u2028\""},
		{`"\ud83d\ude00"`, "\"\U0001F600\""},
		{`9223372036854775807`, `9223372036854775807`},
		{`-9223372036854775808`, `-9223372036854775808`},
	}
	for _, c := range cases {
		got := Encode(nil, parseForTest(t, c.in))
		if string(got) != c.want {
			t.Errorf("Parse+Encode(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	syntax := []string{``, ` `, `01`, `-`, `[1,]`, `{"a":1,}`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`,
		"\"a\tb\"", "\"\xff\"", "\"\xed\xa0\x80\"", `"\x"`, `tru`, `nulll`, `1 2`, `NaN`, "\xef\xbb\xbf1",
		`{1:2}`, `[1 2]`, `"abc`, "[\f]"}
	for _, s := range syntax {
		_, err := Parse([]byte(s))
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, want a syntax error", s, err)
		}
	}
	unmodelled := []string{`1.5`, `1e3`, `9223372036854775808`, `-9223372036854775809`, `{"a":1,"a":2}`,
		strings.Repeat("[", 600) + strings.Repeat("]", 600)}
	for _, s := range unmodelled {
		if _, err := Parse([]byte(s)); err != ErrUnsupported {
			t.Errorf("Parse(%q) = %v, want ErrUnsupported", s[:min(len(s), 20)], err)
		}
	}
	big := `{"k0":0`
	for i := 1; i < 40; i++ {
		big += `,"k` + strings.Repeat("x", i) + `":0`
	}
	if _, err := Parse([]byte(big + `,"k0":1}`)); err != ErrUnsupported {
		t.Errorf("duplicate key in a large object: %v", err)
	}
}

func TestObjSemantics(t *testing.T) {
	o := ObjOf(parseForTest(t, `{"a":1,"b":2,"c":3}`))
	o.Set("b", int64(20)) // keeps its position
	o.Set("d", "x")       // appended
	o.Delete("a")
	if got := string(Encode(nil, o)); got != `{"b":20,"c":3,"d":"x"}` {
		t.Fatalf("after Set/Delete: %s", got)
	}
	if v := o.SetDefault("c", int64(9)); v != int64(3) {
		t.Errorf("SetDefault on a present key = %v", v)
	}
	c := o.Copy()
	c.Update(ObjOf(parseForTest(t, `{"e":1,"b":false}`)))
	if got := string(Encode(nil, c)); got != `{"b":false,"c":3,"d":"x","e":1}` {
		t.Errorf("Update: %s", got)
	}
	if o.Len() != 3 || !o.Has("d") || o.Has("e") || o.Get("zz") != nil {
		t.Errorf("copy shares keys with the original")
	}
	// Large objects switch to an index; it must follow deletes and appends.
	big := NewObj(0)
	for i := 0; i < 40; i++ {
		big.Set(string(rune('A'+i)), int64(i))
	}
	big.Delete("C")
	big.Set("C", int64(100))
	if big.Get("D") != int64(3) || big.Get("C") != int64(100) || big.Keys()[39] != "C" {
		t.Errorf("indexed lookup after delete/append is wrong")
	}
}

// referenceEncodeString is the byte-at-a-time form of appendString.
func referenceEncodeString(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if esc := escapeForm[s[i]]; esc != "" {
			out = append(out, esc...)
		} else {
			out = append(out, s[i])
		}
	}
	return string(append(out, '"'))
}

// TestStringScanWords puts each kind of special byte at every position of
// strings around the eight-byte word sizes the scans step by.
func TestStringScanWords(t *testing.T) {
	for n := 0; n <= 26; n++ {
		for pos := 0; pos < max(n, 1); pos++ {
			for _, special := range []string{"", "\"", "\\", "\n", "\x00", "\x1f", "\x7f", "\u00e9", "\u2028", "\U0001F600", " "} {
				s := strings.Repeat("a", pos) + special + strings.Repeat("b", max(n-pos-1, 0))
				got := string(Encode(nil, s))
				if want := referenceEncodeString(s); got != want {
					t.Fatalf("Encode(%q) = %s, want %s", s, got, want)
				}
				// Inside a document, so the scan can also run past the string.
				doc := `{"k":` + got + `,"z":[` + got + `]}`
				v, err := Parse([]byte(doc))
				if err != nil || ObjOf(v).Get("k") != s || ListOf(ObjOf(v).Get("z"))[0] != s {
					t.Fatalf("Parse(%s) = %v, %v", doc, v, err)
				}
				if v, err := Parse([]byte(got)); err != nil || v != s {
					t.Fatalf("Parse(%s) = %q, %v", got, v, err)
				}
			}
		}
	}
	for _, bad := range []string{"\"abcdefgh\x01\"", "\"abcdefghijklmno\xff\"", "\"abcdefghijklmnopq"} {
		if _, err := Parse([]byte(bad)); err == nil || err == ErrUnsupported {
			t.Errorf("Parse(%q) = %v, want a syntax error", bad, err)
		}
	}
}

// TestParsedValuesAreSeparate checks that values carved from the parser's
// slabs do not share room: growing one never writes into another.
func TestParsedValuesAreSeparate(t *testing.T) {
	v := ListOf(parseForTest(t, `[{"a":1},{"b":2},[1],[2]]`))
	ObjOf(v[0]).Set("c", int64(3))
	_ = append(ListOf(v[2]), int64(9))
	if got := string(Encode(nil, v)); got != `[{"a":1,"c":3},{"b":2},[1],[2]]` {
		t.Errorf("after growing parsed values: %s", got)
	}
}

func TestTruthyEqualDeepCopy(t *testing.T) {
	for _, s := range []string{`null`, `false`, `0`, `""`, `[]`, `{}`} {
		if Truthy(parseForTest(t, s)) {
			t.Errorf("Truthy(%s) = true", s)
		}
	}
	for _, s := range []string{`true`, `-1`, `"0"`, `[null]`, `{"a":null}`} {
		if !Truthy(parseForTest(t, s)) {
			t.Errorf("Truthy(%s) = false", s)
		}
	}
	equal := [][2]string{{`{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`}, {`true`, `1`}, {`[false]`, `[0]`}, {`null`, `null`}}
	for _, p := range equal {
		if !Equal(parseForTest(t, p[0]), parseForTest(t, p[1])) {
			t.Errorf("Equal(%s, %s) = false", p[0], p[1])
		}
	}
	differ := [][2]string{{`[1,2]`, `[2,1]`}, {`{"a":1}`, `{"a":1,"b":1}`}, {`"1"`, `1`}, {`null`, `0`}, {`{"a":null}`, `{"b":null}`}, {`true`, `2`}}
	for _, p := range differ {
		if Equal(parseForTest(t, p[0]), parseForTest(t, p[1])) {
			t.Errorf("Equal(%s, %s) = true", p[0], p[1])
		}
	}
	orig := parseForTest(t, `{"a":[{"b":1}]}`)
	cp := DeepCopy(orig)
	ObjOf(ListOf(ObjOf(cp).Get("a"))[0]).Set("b", int64(2))
	if string(Encode(nil, orig)) != `{"a":[{"b":1}]}` {
		t.Errorf("DeepCopy shares nested objects")
	}
	// json_copy and orjson.dumps raise on values nested too deep to encode.
	deep := parseForTest(t, strings.Repeat("[", 300)+strings.Repeat("]", 300))
	if !panicsUnsupported(func() { DeepCopy(deep) }) || !panicsUnsupported(func() { Encode(nil, deep) }) {
		t.Errorf("copied or encoded a value nested 300 deep")
	}
}

// TestJSONVectors checks Parse+Encode against orjson.loads+dumps on the file
// FOLDCORE_VECTORS_JSON names: lines {"in": base64 input, "out": base64 of
// orjson.dumps(orjson.loads(input)), or null when orjson rejects the input}.
func TestJSONVectors(t *testing.T) {
	sc := vectorLines(t, "FOLDCORE_VECTORS_JSON")
	var total, gaveUp int
	for sc.Scan() {
		vec := ObjOf(parseForTest(t, sc.Text()))
		in := decodeBase64(t, vec.Get("in"))
		out, _ := StrOf(vec.Get("out"))
		total++
		v, err := Parse(in)
		switch {
		case err == ErrUnsupported:
			gaveUp++
		case vec.Get("out") == nil:
			if err == nil {
				t.Errorf("accepted what orjson rejects: %q", in)
			}
		case err != nil:
			t.Errorf("rejected what orjson accepts: %q: %v", in, err)
		case out == "ENCERR": // orjson.dumps refuses it (too deep): Encode must give up
			if !panicsUnsupported(func() { Encode(nil, v) }) {
				t.Errorf("Encode did not give up on %q", in[:min(len(in), 40)])
			}
			gaveUp++
		default:
			want := decodeBase64(t, out)
			if got := Encode(nil, v); !bytes.Equal(got, want) {
				t.Errorf("Encode(Parse(%q)) = %q, want %q", in, got, want)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d vectors, %d given up on", total, gaveUp)
}

// panicsUnsupported reports whether f gives up with an Unsupported panic.
func panicsUnsupported(f func()) bool {
	_, gaveUp := gaveUpReason(f)
	return gaveUp
}

// gaveUpReason runs f and returns the reason it gave up with, if it did.
func gaveUpReason(f func()) (reason string, gaveUp bool) {
	defer func() {
		if r := recover(); r != nil {
			u, ok := r.(Unsupported)
			if !ok {
				panic(r)
			}
			reason, gaveUp = u.Reason, true
		}
	}()
	f()
	return "", false
}

func decodeBase64(t testing.TB, v any) []byte {
	s, _ := StrOf(v)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// benchLine is a typical pleg event of the benchmark workload.
const benchLine = `{"uid":"49c0414c-0b3b-491c-8d66-705973cd5f75","node":"node-017","type":"ContainerStarted","container_id":"49c0414c-app-0","runtime":{"containers":[{"id":"49c0414c-app-0","name":"app","image":"example/app:1","state":"running","exit_code":null,"created_at":"2023-11-14T22:13:21Z","started_at":"2023-11-14T22:13:21Z","finished_at":null,"restart_count":0},{"id":"49c0414c-sidecar","name":"sidecar","image":"example/log:1","state":"running","created_at":"2023-11-14T22:13:20Z","started_at":"2023-11-14T22:13:20Z","restart_count":0}],"ips":["127.0.0.1"],"runtime_type":"sim","sandbox":{"id":"49c0414c-sandbox","ready":true}},"ts_ms":1700000001234}`

func BenchmarkParse(b *testing.B) {
	data := []byte(benchLine)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	v := parseForTest(b, benchLine)
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(benchLine)))
	for b.Loop() {
		buf = Encode(buf[:0], v)
	}
}
