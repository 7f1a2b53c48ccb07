package remote

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// errTooLarge: the response passed Options.MaxResponseBytes.
var errTooLarge = errors.New("response larger than MaxResponseBytes")

// limitReader is io.LimitReader that fails, instead of ending, at the limit,
// so that a cut-off response is never mistaken for a complete one.
type limitReader struct {
	r    io.Reader
	left int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One more byte tells a body of exactly the limit from a longer one.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			return 0, errTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// sseReader reads the server-sent events of a streaming response, the
// framing both vLLM and SGLang use: "data: <json>" lines, events separated
// by a blank line, and a final "data: [DONE]". Comment lines (":") and
// other fields (event:, id:, retry:) are skipped.
type sseReader struct {
	r    *bufio.Reader
	data []byte
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// sseDone is the data of the stream's last event.
var sseDone = []byte("[DONE]")

// next returns the data of the next event. It returns io.EOF when the body
// ends with no pending event and io.ErrUnexpectedEOF when the body ends in
// the middle of a line. The returned slice is valid until the next call.
func (s *sseReader) next() ([]byte, error) {
	s.data = s.data[:0]
	have := false
	for {
		line, err := s.r.ReadBytes('\n')
		if err != nil {
			if err == io.EOF {
				if len(line) > 0 {
					return nil, io.ErrUnexpectedEOF
				}
				if have {
					return s.data, nil
				}
			}
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if have {
				return s.data, nil
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if len(field) == 0 || string(field) != "data" {
			continue // comment or a field we do not use
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if have {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		have = true
	}
}
