package storage_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tcpFaults is a fault-injecting TCP proxy between an S3 client and an S3
// server. It forwards bytes unchanged; to know where requests begin it reads
// each request's head (up to the blank line) and Content-Length, so a fault
// can target one kind of request (a part upload, a completion, a GET) and
// strike at a chosen byte of its body or of its answer. The Go HTTP client
// does not pipeline, so the bytes the server sends after a request was
// forwarded are that request's answer.
//
// Faults are rules tried in order on each request; a rule with times left
// matches at most that many requests (times < 0: every request).
type tcpFaults struct {
	URL    string // http://127.0.0.1:PORT
	target string // host:port of the server

	mu    sync.Mutex
	rules []*faultRule
	delay time.Duration // before every chunk forwarded, both ways
	err   error         // the first framing the proxy could not follow

	requests, injected atomic.Int64
	ln                 net.Listener
	wg                 sync.WaitGroup
	conns              map[*net.TCPConn]bool // client connections open, under mu
}

// faultKind is what a rule does to the request it matches.
type faultKind int

const (
	// resetUpload forwards the head and `after` bytes of the body, then
	// resets both connections (RST): a connection lost mid-upload.
	resetUpload faultKind = iota
	// resetDownload forwards the request and `after` bytes of the answer,
	// then resets both connections: a connection lost mid-download.
	resetDownload
	// lostAck forwards the whole request and resets the connections when
	// the answer starts: the server did the work, the client never hears.
	lostAck
	// slowDown answers 503 SlowDown itself; the server never sees it.
	slowDown
	// noSuchUpload answers 404 NoSuchUpload itself, as S3 answers a
	// completion retried after its first try completed the upload (the
	// upload id is gone); the server never sees it.
	noSuchUpload
	// insufficientStorage answers 507 InsufficientStorage itself: a server
	// out of space; the server never sees it.
	insufficientStorage
	// restart forwards the head and `after` bytes of the body, runs the
	// rule's hook (a server restart) and resets the connections.
	restart
)

type faultRule struct {
	name  string
	match func(*http.Request) bool
	kind  faultKind
	after int64
	times int
	hook  func() error
}

// newTCPFaults proxies to the server at target (host:port).
func newTCPFaults(t *testing.T, target string) *tcpFaults {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpFaults{URL: "http://" + ln.Addr().String(), target: target, ln: ln, conns: map[*net.TCPConn]bool{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		// Close the client's idle keep-alive connections rather than wait
		// for the server to time them out (MinIO waits 30 s).
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
		if p.err != nil {
			t.Errorf("fault proxy: %v", p.err)
		}
	})
	return p
}

// add appends a rule.
func (p *tcpFaults) add(r faultRule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &r)
}

// clear drops every rule and the delay.
func (p *tcpFaults) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules, p.delay = nil, 0
}

func (p *tcpFaults) setDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

func (p *tcpFaults) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

// pick returns the first rule that matches r, using up one of its times.
func (p *tcpFaults) pick(r *http.Request) *faultRule {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rule := range p.rules {
		if rule.times != 0 && rule.match(r) {
			if rule.times > 0 {
				rule.times--
			}
			p.injected.Add(1)
			return rule
		}
	}
	return nil
}

func (p *tcpFaults) sleep() {
	p.mu.Lock()
	d := p.delay
	p.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
}

func (p *tcpFaults) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		client := c.(*net.TCPConn)
		p.mu.Lock()
		p.conns[client] = true
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.carry(client)
			p.mu.Lock()
			delete(p.conns, client)
			p.mu.Unlock()
		}()
	}
}

// reset closes both connections with RST.
func reset(cs ...*net.TCPConn) {
	for _, c := range cs {
		if c != nil {
			c.SetLinger(0)
			c.Close()
		}
	}
}

// answer is what the client-side loop tells the server-side loop about
// the next answer.
type answer struct {
	kind  faultKind // resetDownload or lostAck; -1: forward
	after int64
}

// carry proxies one client connection.
func (p *tcpFaults) carry(client *net.TCPConn) {
	sc, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close() // the server is down: the client sees a closed connection
		return
	}
	server := sc.(*net.TCPConn)
	var next atomic.Pointer[answer] // how to treat the next bytes of answer
	done := make(chan struct{})
	go func() { // server -> client
		defer close(done)
		buf := make([]byte, 32<<10)
		var sent int64 // bytes of the answer a points to
		var cur *answer
		for {
			n, err := server.Read(buf)
			if n > 0 {
				a := next.Load()
				if a != cur {
					cur, sent = a, 0
				}
				switch {
				case a != nil && a.kind == lostAck:
					reset(client, server)
					return
				case a != nil && a.kind == resetDownload && sent+int64(n) > a.after:
					client.Write(buf[:a.after-sent])
					reset(client, server)
					return
				}
				sent += int64(n)
				p.sleep()
				if _, err := client.Write(buf[:n]); err != nil {
					reset(client, server)
					return
				}
			}
			if err != nil {
				client.CloseWrite()
				return
			}
		}
	}()
	defer func() {
		reset(client, server)
		<-done
	}()
	br := bufio.NewReaderSize(client, 64<<10)
	for {
		head, req, err := readHead(br)
		if err != nil {
			if err != io.EOF && !isClosed(err) {
				p.fail(err)
			}
			return
		}
		p.requests.Add(1)
		size := req.ContentLength
		if size < 0 || len(req.TransferEncoding) > 0 {
			p.fail(fmt.Errorf("%s %s: body of unknown length", req.Method, req.URL))
			return
		}
		rule := p.pick(req)
		next.Store(nil)
		if status, code, msg, ok := ownAnswer(rule); ok {
			if _, err := io.CopyN(io.Discard, br, size); err != nil {
				return
			}
			body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>` + msg + `</Message></Error>`
			fmt.Fprintf(client, "HTTP/1.1 %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n%s", status, len(body), body)
			continue
		}
		if rule != nil && (rule.kind == resetDownload || rule.kind == lostAck) {
			next.Store(&answer{kind: rule.kind, after: rule.after})
		}
		p.sleep()
		if _, err := server.Write(head); err != nil {
			return
		}
		body := size
		if rule != nil && (rule.kind == resetUpload || rule.kind == restart) {
			body = min(size, rule.after)
		}
		if err := p.copyBody(server, br, body); err != nil {
			return
		}
		if rule != nil && (rule.kind == resetUpload || rule.kind == restart) {
			if rule.kind == restart {
				if err := rule.hook(); err != nil {
					p.fail(fmt.Errorf("%s: %v", rule.name, err))
				}
			}
			reset(client, server)
			return
		}
	}
}

// ownAnswer is the S3 error the proxy answers itself for a rule of a kind
// the server never sees; ok is false for the other kinds.
func ownAnswer(rule *faultRule) (status, code, msg string, ok bool) {
	if rule == nil {
		return "", "", "", false
	}
	switch rule.kind {
	case slowDown:
		return "503 Service Unavailable", "SlowDown", "Please reduce your request rate.", true
	case noSuchUpload:
		return "404 Not Found", "NoSuchUpload", "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.", true
	case insufficientStorage:
		return "507 Insufficient Storage", "InsufficientStorage", "Your storage space is full.", true
	}
	return "", "", "", false
}

// copyBody forwards n bytes of body in chunks.
func (p *tcpFaults) copyBody(dst io.Writer, src io.Reader, n int64) error {
	buf := make([]byte, 32<<10)
	for n > 0 {
		k, err := io.ReadFull(src, buf[:min(int64(len(buf)), n)])
		if k > 0 {
			p.sleep()
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return werr
			}
			n -= int64(k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readHead reads one request head, up to and with its blank line, and
// parses it.
func readHead(br *bufio.Reader) ([]byte, *http.Request, error) {
	var head []byte
	for {
		line, err := br.ReadSlice('\n')
		head = append(head, line...)
		if err != nil {
			if err == io.EOF && len(head) == 0 {
				return nil, nil, io.EOF
			}
			return nil, nil, err
		}
		if len(line) <= 2 && len(head) > 2 { // "\r\n" or "\n"
			break
		}
		if len(head) > 64<<10 {
			return nil, nil, fmt.Errorf("request head over 64 KiB")
		}
	}
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil {
		return nil, nil, fmt.Errorf("parse request head %q: %v", head, err)
	}
	if cl := req.Header.Get("Content-Length"); cl != "" {
		if req.ContentLength, err = strconv.ParseInt(cl, 10, 64); err != nil {
			return nil, nil, fmt.Errorf("bad Content-Length %q", cl)
		}
	} else if len(req.TransferEncoding) == 0 {
		req.ContentLength = 0
	}
	return head, req, nil
}

// isClosed reports whether err is a connection ending, not a framing error.
func isClosed(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Request matchers of the S3 API.

func isSinglePut(r *http.Request) bool {
	return r.Method == http.MethodPut && !r.URL.Query().Has("uploadId")
}

func isPart(n int) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == strconv.Itoa(n)
	}
}

func isComplete(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Query().Has("uploadId")
}

func isObjectGet(r *http.Request) bool {
	q := r.URL.Query()
	return r.Method == http.MethodGet && !q.Has("list-type") && !q.Has("location") && !q.Has("uploads") && bytes.Count([]byte(r.URL.Path), []byte("/")) >= 2
}

func anyRequest(*http.Request) bool { return true }
