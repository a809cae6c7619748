package gateway

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// The gateway asks every provider for its answer unencoded (identity):
// the sandbox's client asks for gzip, br or zstd by default (Go's, Python
// httpx's, Node's fetch, git's curl), and an answer passed on compressed
// would be read by the Observer as bytes without usage. Nothing obliges a
// provider to honour identity, though, so an answer that comes encoded
// anyway goes to the sandbox as it came (its client asked for that
// encoding, or at least accepts the provider's answer as it is) and the
// Observer gets it decoded, bounded.
const (
	// upstreamEncoding is what the gateway asks the providers for.
	upstreamEncoding = "identity"
	// maxDecodedBytes bounds what one answer decodes to, at each layer of
	// its encoding: a decompression bomb costs the gateway this much CPU
	// and no memory beyond the decoders' windows. Usage comes at the end
	// of an answer, so an answer larger than this decoded is not counted.
	maxDecodedBytes = 64 << 20
	// maxZstdWindow is the largest zstd window decoded: RFC 9659 bounds
	// the zstd content coding's window to 8 MiB.
	maxZstdWindow = 8 << 20
	// maxEncodingLayers bounds the encodings one answer may stack.
	maxEncodingLayers = 3
)

// errTooLarge: the answer decodes to more than maxDecodedBytes.
var errTooLarge = fmt.Errorf("the answer decodes to more than %d bytes", maxDecodedBytes)

// answerEncodings are the content codings of an answer's header, in the
// order they were applied, without identity; ok is false for one the
// gateway cannot decode or more than maxEncodingLayers.
func answerEncodings(h http.Header) (codings []string, ok bool) {
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			switch c {
			case "", "identity":
			case "gzip", "x-gzip", "deflate", "br", "zstd":
				codings = append(codings, c)
			default:
				return nil, false
			}
		}
	}
	return codings, len(codings) <= maxEncodingLayers
}

// decodeReader reads r decoded of codings (applied in that order), each
// layer bounded to limit bytes (past it: errTooLarge). close ends the
// decoders' resources.
func decodeReader(r io.Reader, codings []string, limit int64) (out io.Reader, close func(), err error) {
	var closers []func()
	close = func() {
		for _, c := range closers {
			c()
		}
	}
	out = r
	for i := len(codings) - 1; i >= 0; i-- {
		var d io.Reader
		switch codings[i] {
		case "gzip", "x-gzip":
			z, err := gzip.NewReader(out)
			if err != nil {
				close()
				return nil, nil, fmt.Errorf("read the gzip header: %w", err)
			}
			closers = append(closers, func() { z.Close() })
			d = z
		case "deflate":
			d, err = deflateReader(out)
			if err != nil {
				close()
				return nil, nil, err
			}
		case "br":
			d = brotli.NewReader(out)
		case "zstd":
			z, err := zstd.NewReader(out, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(maxZstdWindow), zstd.WithDecoderMaxMemory(uint64(limit)))
			if err != nil {
				close()
				return nil, nil, fmt.Errorf("start the zstd decoder: %w", err)
			}
			closers = append(closers, z.Close)
			d = z
		}
		out = &boundedReader{r: d, left: limit}
	}
	return out, close, nil
}

// deflateReader reads HTTP's deflate: zlib-wrapped as the RFC says, or the
// raw deflate some servers send instead.
func deflateReader(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(2)
	if err != nil && len(head) < 2 {
		return nil, fmt.Errorf("read the deflate header: %w", err)
	}
	if head[0]&0x0f == 8 && (uint16(head[0])<<8|uint16(head[1]))%31 == 0 {
		return zlib.NewReader(br)
	}
	return flate.NewReader(br), nil
}

// boundedReader fails with errTooLarge past left bytes.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a stream that ends here from a longer one.
		var one [1]byte
		if n, err := b.r.Read(one[:]); n == 0 && err != nil {
			return 0, err
		}
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// decodingTap hands its Tap an encoded answer decoded. The decoders read
// (pull) and the answer arrives in chunks (push): a goroutine decodes what
// a pipe carries, and Body waits while it takes each chunk in, which
// costs at most the decoding of a chunk (bounded: maxDecodedBytes in all).
type decodingTap struct {
	inner Tap
	pw    *io.PipeWriter
	done  chan struct{}
	// err is why decoding stopped early (nil: it did not); written by the
	// goroutine before done closes.
	err error
	in  int64 // bytes given to Body
	// stopped, when set, hears at End why decoding stopped before the
	// answer's end (never for an empty answer, as a HEAD's).
	stopped func(err error)
}

// newDecodingTap decodes codings for inner, each layer bounded to limit.
func newDecodingTap(inner Tap, codings []string, limit int64, stopped func(error)) *decodingTap {
	pr, pw := io.Pipe()
	d := &decodingTap{inner: inner, pw: pw, done: make(chan struct{}), stopped: stopped}
	go d.run(pr, codings, limit)
	return d
}

func (d *decodingTap) run(pr *io.PipeReader, codings []string, limit int64) {
	defer close(d.done)
	r, closeDec, err := decodeReader(pr, codings, limit)
	if err == nil {
		_, err = io.Copy(tapWriter{d.inner}, r)
		closeDec()
	}
	if err != nil && !errors.Is(err, io.ErrClosedPipe) {
		d.err = err
	}
	// Body returns at once from here on.
	pr.CloseWithError(io.ErrClosedPipe)
}

// Body passes p to the decoder; once it stopped, p goes nowhere.
func (d *decodingTap) Body(p []byte) {
	d.in += int64(len(p))
	_, _ = d.pw.Write(p)
}

// End waits for the decoder to take in what came, then ends inner.
func (d *decodingTap) End(c *Call) {
	_ = d.pw.Close()
	<-d.done
	if d.err != nil && d.in > 0 && d.stopped != nil {
		d.stopped(d.err)
	}
	d.inner.End(c)
}

// mutedTap hears an answer's end but not its body: one in an encoding the
// gateway cannot decode, whose bytes would read as garbage.
type mutedTap struct{ inner Tap }

func (mutedTap) Body([]byte)   {}
func (m mutedTap) End(c *Call) { m.inner.End(c) }

// decodeFor gives t (nil: none) the body of cl's answer decoded from the
// Content-Encoding of h. An answer it cannot decode is logged: its usage
// goes uncounted.
func (s *Service) decodeFor(t Tap, cl *call, h http.Header) Tap {
	if t == nil {
		return nil
	}
	codings, ok := answerEncodings(h)
	warn := func(why string) {
		s.log.Warn("model gateway: the provider's answer came encoded and could not be read for its usage",
			"provider", cl.c.Provider, "container", cl.c.Container, "contentEncoding", truncate(h.Values("Content-Encoding")), "why", why)
	}
	switch {
	case !ok:
		warn("an encoding the gateway does not decode")
		return mutedTap{t}
	case len(codings) == 0:
		return t
	}
	return newDecodingTap(t, codings, maxDecodedBytes, func(err error) { warn(err.Error()) })
}

// truncate joins a header's values, at most 64 bytes of them (the
// provider's header, into the log).
func truncate(vs []string) string {
	v := strings.Join(vs, ", ")
	if len(v) > 64 {
		v = v[:64]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, v)
}

// tapWriter writes to a Tap.
type tapWriter struct{ t Tap }

func (w tapWriter) Write(p []byte) (int, error) {
	w.t.Body(p)
	return len(p), nil
}
