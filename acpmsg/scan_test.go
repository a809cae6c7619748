package acpmsg

import (
	"encoding/json"
	"testing"
)

func scanValid(data []byte) bool {
	s := scanner{data: data}
	s.ws()
	if s.pos >= len(data) {
		return false
	}
	return s.skip(0) == nil && s.end() == nil
}

func TestScannerAgreesWithEncodingJSON(t *testing.T) {
	cases := []string{
		`{}`, `[]`, `""`, `0`, `-0`, `1.5e+3`, `01`, `1.`, `.5`, `-`, `1e`, `true`, `tru`, `nul`, `null `,
		`{"a":1,}`, `[1,]`, `{"a" 1}`, `{"a":1 "b":2}`, `"\u00e9"`, `"\ud83d\ude80"`, `"\ud83d"`, `"\x"`, "\"\t\"",
		`"\u12"`, `{"a":[{"b":null}]}`, ` {"a":"b"} `, `{"a":"b"}x`, `[1 2]`, "\"\xff\"", `{"a":{"b":}}`,
	}
	for _, c := range cases {
		if got, want := scanValid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("%q: scanner %v, encoding/json %v", c, got, want)
		}
	}
}

func TestScannerStringsMatchEncodingJSON(t *testing.T) {
	cases := []string{`"plain"`, `"é日🚀"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u0041\u00e9"`, `"\ud83d\ude80"`,
		`"\ud83d"`, `"\ude80\ud83d"`, `"\ud83dx"`, `"\ud83d\u0041"`, "\"a\xffb\"", "\"\xed\xa0\x80\""}
	for _, c := range cases {
		var want string
		if err := json.Unmarshal([]byte(c), &want); err != nil {
			t.Fatalf("%q: %v", c, err)
		}
		s := scanner{data: []byte(c)}
		got, err := s.str()
		if err != nil || got != want {
			t.Errorf("%q: scanner %q (%v), encoding/json %q", c, got, err, want)
		}
	}
}

// FuzzScannerAgreesWithEncodingJSON: the scanner accepts exactly what
// encoding/json accepts, and decodes strings to the same text.
func FuzzScannerAgreesWithEncodingJSON(f *testing.F) {
	for _, c := range []string{`{"a":[1,true,null,"x\u00e9"]}`, `"\ud83d\ude80"`, `-1.5e-3`, `[{}]`} {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := scanValid(data), json.Valid(data); got != want {
			t.Fatalf("%q: scanner %v, encoding/json %v", data, got, want)
		}
		var want string
		if json.Unmarshal(data, &want) == nil {
			s := scanner{data: data}
			s.ws()
			got, err := s.str()
			if err != nil || got != want {
				t.Fatalf("%q: scanner %q (%v), encoding/json %q", data, got, err, want)
			}
		}
	})
}
