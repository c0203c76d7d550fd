package testdb

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy between a backend and its PostgreSQL or MySQL
// server, for tests of what a broken connection does to a write. It
// passes bytes both ways untouched until told otherwise:
//
//   - LoseReply arms it to lose the reply to a write that committed: the
//     connection whose statement carries the markers is watched, and at
//     the reply that ends its write (to the statement itself when it ran
//     outside a transaction, else to the transaction's COMMIT) the proxy
//     resets both sides instead of passing the reply on. The server has
//     committed; the client never learns it.
//   - Hold holds back the statement that carries a marker, and with it
//     the connection, until released.
//   - Down refuses connections and resets the open ones; Up listens again.
//
// It speaks the protocols without TLS, as the test servers' DSNs do.
type Proxy struct {
	t      testing.TB
	proto  string // "postgres" or "mysql"
	target string
	addr   string

	mu     sync.Mutex
	ln     net.Listener
	links  map[*link]struct{}
	lose   [][]byte // markers of the write whose reply to lose; nil: none
	commit bool     // lose only a transaction's COMMIT
	lost   int
	holds  []*hold
	closed bool
	done   chan struct{} // closed by Close: held statements go on
	wg     sync.WaitGroup
}

// hold is a statement Hold holds back.
type hold struct {
	marker  []byte
	taken   bool
	release chan struct{}
}

// NewProxy starts a proxy to the server of dsn (a postgres:// or mysql://
// URL, as Postgres and MySQL return) and returns it with the DSN that
// reaches the same database through it. It stops when the test ends.
func NewProxy(t testing.TB, dsn string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("proxy: DSN: %v", err)
	}
	proto := u.Scheme
	if proto == "postgresql" {
		proto = "postgres"
	}
	if proto != "postgres" && proto != "mysql" {
		t.Fatalf("proxy: DSN scheme %q: want postgres or mysql", u.Scheme)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{t: t, proto: proto, target: u.Host, addr: ln.Addr().String(),
		ln: ln, links: make(map[*link]struct{}), done: make(chan struct{})}
	p.wg.Add(1)
	go p.serve(ln)
	t.Cleanup(p.close)
	u.Host = p.addr
	return p, u.String()
}

// LoseReply arms the proxy to lose the reply of the next write whose
// statement carries every marker (as the client sends it: a statement's
// parameters travel as text, JSON included, or raw bytes). One write per
// call: a retry that carries the markers again goes through.
func (p *Proxy) LoseReply(markers ...string) {
	p.arm(markers, false)
}

// LoseCommit is LoseReply for a write in a transaction only: a statement
// with the markers that ran outside one (PostgreSQL) is passed on, and
// the proxy stays armed for the next.
func (p *Proxy) LoseCommit(markers ...string) {
	p.arm(markers, true)
}

func (p *Proxy) arm(markers []string, commit bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lose = make([][]byte, len(markers))
	for i, m := range markers {
		p.lose[i] = []byte(m)
	}
	p.commit = commit
}

// Lost returns how many replies the proxy lost.
func (p *Proxy) Lost() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

// Hold holds back the next statement that carries marker, and so its
// connection, until release is called (or the test ends).
func (p *Proxy) Hold(marker string) (release func()) {
	h := &hold{marker: []byte(marker), release: make(chan struct{})}
	p.mu.Lock()
	p.holds = append(p.holds, h)
	p.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(h.release) }) }
}

// Held returns how many statements are held back now.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, h := range p.holds {
		if h.taken {
			n++
		}
	}
	return n
}

// Down stops accepting connections (a client's connect is refused) and
// resets the open ones, and returns once the clients' ends of them are
// closed (on Linux, where /proc/net/tcp tells; elsewhere at once): the
// next write on any of them fails before sending anything.
func (p *Proxy) Down() {
	p.t.Helper()
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	var links []*link
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	ports := make(map[int]bool)
	for _, l := range links {
		ports[l.client.RemoteAddr().(*net.TCPAddr).Port] = true
		l.close()
	}
	p.waitReset(ports)
}

// Up listens again on the proxy's address after Down.
func (p *Proxy) Up() {
	p.t.Helper()
	var (
		ln  net.Listener
		err error
	)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ln, err = net.Listen("tcp", p.addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("proxy: listen again: %v", err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go p.serve(ln)
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	ln := p.ln
	p.ln = nil
	var links []*link
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	close(p.done)
	if ln != nil {
		ln.Close()
	}
	for _, l := range links {
		l.close()
	}
	p.wg.Wait()
}

func (p *Proxy) serve(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{p: p, client: c.(*net.TCPConn), server: s.(*net.TCPConn)}
		p.mu.Lock()
		if p.closed || p.ln != ln {
			p.mu.Unlock()
			l.close()
			continue
		}
		p.links[l] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go l.up()
		go l.down()
	}
}

// marks reports whether a client's bytes carry the armed markers, and
// disarms the proxy if they do, returning what rearms it (LoseCommit:
// for a statement that turns out to run alone). b is the last read
// behind the tail of the reads before it, old bytes long: one marker at
// least must end in the last read, or a statement sent before the proxy
// was armed would be taken for the next one on its connection.
func (p *Proxy) marks(b []byte, old int) (rearm func(), ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lose == nil {
		return nil, false
	}
	fresh := false
	for _, m := range p.lose {
		if !bytes.Contains(b, m) {
			return nil, false
		}
		fresh = fresh || endsAfter(b, old, m)
	}
	if !fresh {
		return nil, false
	}
	markers, commit := p.lose, p.commit
	p.lose = nil
	if !commit {
		return nil, true
	}
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.lose == nil {
			p.lose, p.commit = markers, true
		}
	}, true
}

// endsAfter reports whether m occurs in b ending past its first old
// bytes.
func endsAfter(b []byte, old int, m []byte) bool {
	return bytes.Contains(b[max(0, old-len(m)+1):], m)
}

// holdFor returns the hold whose marker b carries, ending past its first
// old bytes (see marks), taking it, or nil.
func (p *Proxy) holdFor(b []byte, old int) *hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.holds {
		if !h.taken && endsAfter(b, old, h.marker) {
			h.taken = true
			return h
		}
	}
	return nil
}

func (p *Proxy) wait(h *hold) {
	select {
	case <-h.release:
	case <-p.done:
	}
	p.mu.Lock()
	// Never again: a hold released is dropped (an empty marker would
	// match every statement, ahead of the holds armed after it).
	p.holds = slices.DeleteFunc(p.holds, func(x *hold) bool { return x == h })
	p.mu.Unlock()
}

// waitReset waits until no client socket of ports to the proxy is still
// open for writing, as /proc/net/tcp lists them.
func (p *Proxy) waitReset(ports map[int]bool) {
	_, port, _ := net.SplitHostPort(p.addr)
	proxyPort, _ := strconv.Atoi(port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		open, err := openClients(ports, proxyPort)
		if err != nil || open == 0 {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("proxy: %d client connections still open 30 s after their reset", open)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openClients counts the sockets of /proc/net/tcp from one of ports to
// the proxy's port that a client could still write to.
func openClients(ports map[int]bool, proxyPort int) (int, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[0] == "sl" {
			continue
		}
		local, remote, state := hexPort(fields[1]), hexPort(fields[2]), fields[3]
		// 01: established, 08: the peer closed (the client may still write).
		if ports[local] && remote == proxyPort && (state == "01" || state == "08") {
			n++
		}
	}
	return n, sc.Err()
}

// hexPort reads the port of an address of /proc/net/tcp (0100007F:1F90).
func hexPort(addr string) int {
	_, h, ok := strings.Cut(addr, ":")
	if !ok {
		return -1
	}
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 2 {
		return -1
	}
	return int(binary.BigEndian.Uint16(b))
}

// link is one proxied connection.
type link struct {
	p              *Proxy
	client, server *net.TCPConn
	// marked: the connection sent the markers; lose the reply that ends
	// its write.
	marked atomic.Bool
	// rearm (LoseCommit) rearms the proxy if the marked statement ran
	// alone; set before marked.
	rearm func()
	// committing (MySQL): the marked write's COMMIT went out.
	committing atomic.Bool
	// inTx (PostgreSQL): a reply since the mark left a transaction open.
	inTx bool
	once sync.Once
}

// mysqlCommit is the packet of MySQL's COM_QUERY "COMMIT", as
// go-sql-driver/mysql sends it: length 7, sequence 0.
var mysqlCommit = []byte("\x07\x00\x00\x00\x03COMMIT")

// markerSpan bounds a marker: so many bytes of one read are kept to find
// a marker split across two reads.
const markerSpan = 256

// up passes the client's bytes to the server.
func (l *link) up() {
	defer l.p.wg.Done()
	defer l.close()
	buf := make([]byte, 64<<10)
	var tail []byte
	for {
		n, err := l.client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			seen := append(tail, chunk...)
			if l.marked.Load() {
				if l.p.proto == "mysql" && bytes.Contains(chunk, mysqlCommit) {
					l.committing.Store(true)
				}
			} else if rearm, ok := l.p.marks(seen, len(tail)); ok {
				l.rearm = rearm
				l.marked.Store(true)
			}
			if h := l.p.holdFor(seen, len(tail)); h != nil {
				l.p.wait(h)
			}
			tail = append(tail[:0], seen[max(0, len(seen)-markerSpan):]...)
			if _, werr := l.server.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// down passes the server's bytes to the client, but for the reply it
// loses.
func (l *link) down() {
	defer l.p.wg.Done()
	defer l.close()
	buf := make([]byte, 64<<10)
	var reply []byte // PostgreSQL: a marked connection's reply so far
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
			out, lose := buf[:n], false
			switch {
			case l.p.proto == "mysql":
				lose = l.committing.Load()
			case l.marked.Load():
				reply = append(reply, out...)
				out, reply, lose = l.pgReply(reply)
			}
			if lose {
				l.p.mu.Lock()
				l.p.lost++
				l.p.mu.Unlock()
				return
			}
			if _, werr := l.client.Write(out); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pgReply splits what a marked PostgreSQL connection received into what
// to pass on and what to keep: replies are passed whole, each ending in a
// ReadyForQuery message; lose reports the one whose ReadyForQuery says
// the connection is out of a transaction ('I'): the reply to the write's
// COMMIT, or to the write itself when it ran alone (but for LoseCommit,
// which passes that one on, unmarks the connection and rearms).
func (l *link) pgReply(b []byte) (out, rest []byte, lose bool) {
	off := 0
	for off+5 <= len(b) {
		end := off + 1 + int(binary.BigEndian.Uint32(b[off+1:]))
		if end > len(b) {
			break
		}
		if b[off] != 'Z' || end <= off+5 {
			off = end
			continue
		}
		out = append(out, b[:end]...)
		b, off = b[end:], 0
		switch {
		case out[len(out)-1] != 'I':
			l.inTx = true
		case l.inTx || l.rearm == nil:
			return nil, nil, true
		default:
			l.marked.Store(false)
			l.rearm()
			return append(out, b...), nil, false
		}
	}
	return out, b, false
}

// close resets both sides.
func (l *link) close() {
	l.once.Do(func() {
		for _, c := range []*net.TCPConn{l.client, l.server} {
			_ = c.SetLinger(0)
			c.Close()
		}
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
	})
}

// String describes the proxy, for test logs.
func (p *Proxy) String() string {
	return fmt.Sprintf("%s proxy %s -> %s", p.proto, p.addr, p.target)
}
