package gateway

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/atomicfile"
	"github.com/aimi-tools/swarm/internal/daemonca"
	"github.com/aimi-tools/swarm/internal/svclisten"
	"github.com/aimi-tools/swarm/usage"
)

// File names in the gateway's directory.
const (
	grantsName = "grants.json"                     // 0600: placeholder hashes, never placeholders
	bundleName = "ca-bundle.pem"                   // 0644: the host's roots and the daemon's CA
	prefix     = contract.GatewayPlaceholderPrefix // of every placeholder, so a leak is recognisable
)

// Limits bound what sandboxes can take of the gateway. Zero fields take
// their defaults.
type Limits struct {
	// MaxConns and MaxConnsPerPeer bound the connections held at once, in
	// total and from one source address (a container; on a cluster, a
	// node); connections past them are closed as they are accepted.
	MaxConns, MaxConnsPerPeer int
	// MaxInFlight bounds the requests of one container forwarded at once;
	// one past it waits up to a minute, then gets 429.
	MaxInFlight int
	// MaxHeaderBytes bounds a request's headers, MaxBodyBytes its body
	// (413 past it), MaxAnswerHeaderBytes the upstream answer's headers.
	MaxHeaderBytes       int
	MaxBodyBytes         int64
	MaxAnswerHeaderBytes int64
	// Idle closes a keep-alive connection idle this long; Request bounds a
	// whole call, its streamed answer included.
	Idle, Request time.Duration
	// LimitWait bounds how long a call waits at the gateway for a
	// provider's limit to reset or for a place under its max_concurrent
	// (then 429); LimitQueue how many calls of one provider and key wait.
	LimitWait  time.Duration
	LimitQueue int
	// LimitMaxWait bounds the reset a provider's limited answer asks for
	// (agent.limit_max_wait; default usage.DefaultLimitMaxWait): a
	// negative, garbled or enormous retry-after is cut to it.
	LimitMaxWait time.Duration
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxConns, 1024)
	def(&l.MaxConnsPerPeer, 64)
	def(&l.MaxInFlight, 16)
	def(&l.MaxHeaderBytes, 64<<10)
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = 32 << 20
	}
	if l.MaxAnswerHeaderBytes <= 0 {
		l.MaxAnswerHeaderBytes = 64 << 10
	}
	if l.Idle <= 0 {
		l.Idle = 2 * time.Minute
	}
	if l.Request <= 0 {
		l.Request = time.Hour
	}
	if l.LimitWait <= 0 {
		l.LimitWait = 15 * time.Minute
	}
	def(&l.LimitQueue, 1024)
	if l.LimitMaxWait <= 0 {
		l.LimitMaxWait = usage.DefaultLimitMaxWait
	}
	l.MaxConnsPerPeer = min(l.MaxConnsPerPeer, l.MaxConns)
	return l
}

// Options configure a Service.
type Options struct {
	// DataDir holds the gateway's grants (placeholder hashes) and the CA
	// bundle; CADir the daemon's CA (shared with the git service).
	DataDir, CADir string
	// Providers are the upstreams (Builtin with the configured urls, and
	// those declared in configuration).
	Providers map[string]Provider
	// Keys are the real values of the key variables (from agent.env):
	// they stay in the daemon.
	Keys map[string]string
	// Observer, when set, hears every call (see Observer).
	Observer Observer
	Limits   Limits
	Logger   *slog.Logger
	// Transport reaches the upstreams (default: a clone of
	// http.DefaultTransport with the answer header bound).
	Transport http.RoundTripper
	// SweepInterval is how often addresses the host no longer has are
	// dropped (default svclisten.DefaultSweepInterval).
	SweepInterval time.Duration
}

// Grant is what one container gets: the variables that replace its model
// keys (a placeholder per key, the providers' base URLs on the gateway),
// and the host paths of the CA (to add to a trust store:
// NODE_EXTRA_CA_CERTS) and of the bundle (a whole trust store: the host's
// roots and the CA, for SSL_CERT_FILE and REQUESTS_CA_BUNDLE).
type Grant struct {
	Env        map[string]string
	CAFile     string
	BundleFile string
}

// record is one placeholder of one container, persisted without the
// placeholder (its SHA-256 only).
type record struct {
	Swarm     string `json:"swarm"`
	Container string `json:"container"`
	Var       string `json:"var"`
	Provider  string `json:"provider"`
	Hash      string `json:"hash"`
	Gateway   string `json:"gateway"`
	Peer      string `json:"peer,omitempty"`
	// Earlier marks a placeholder of the grant before, still valid: a
	// grant again through the same gateway is a daemon restarted between
	// handing placeholders over and noting it, and the container may hold
	// either (its runner reads only the first claim).
	Earlier bool `json:"earlier,omitempty"`
}

// sandbox is the container the record's placeholder is for.
func (r record) sandbox() contract.Sandbox {
	return contract.Sandbox{Swarm: r.Swarm, Container: r.Container}
}

type persisted struct {
	svclisten.Addresses
	Records []*record `json:"records"`
}

// Service is the model gateway: an http.Handler served on the sandbox
// networks' gateways.
type Service struct {
	dir       string
	log       *slog.Logger
	ca        *daemonca.Authority
	caFile    string
	providers map[string]Provider
	keys      map[string]string
	owner     map[string]string // key variable -> provider
	observer  Observer
	limits    Limits
	limiter   *limiter
	met       metLimits // the limits each container's calls met
	budget    budgetSlot
	conns     *svclisten.Conns
	proxy     http.Handler

	mu       sync.Mutex
	byHash   map[string]*record
	inflight map[contract.Sandbox]chan struct{}
	listen   *svclisten.Shell
}

// New opens the gateway's directory and the daemon's CA, and listens again
// on the addresses it served before a restart (containers keep their
// placeholders across it). It does not listen otherwise: ListenOn does.
func New(opts Options) (*Service, error) {
	if opts.DataDir == "" || opts.CADir == "" {
		return nil, errors.New("model gateway: Options.DataDir and CADir are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create the model gateway's directory %s: %w", opts.DataDir, err)
	}
	if err := os.MkdirAll(opts.CADir, 0o700); err != nil {
		return nil, fmt.Errorf("create the CA directory %s: %w", opts.CADir, err)
	}
	ca, _, err := daemonca.LoadOrCreate(opts.CADir)
	if err != nil {
		return nil, err
	}
	s := &Service{
		dir: opts.DataDir, log: opts.Logger.With("component", "gateway"), ca: ca,
		caFile:    filepath.Join(opts.CADir, daemonca.CertName),
		providers: opts.Providers, keys: maps.Clone(opts.Keys), owner: keyOwners(opts.Providers),
		observer: opts.Observer, limits: opts.Limits.withDefaults(),
		byHash: map[string]*record{}, inflight: map[contract.Sandbox]chan struct{}{},
	}
	s.limiter = newLimiter(s.limits.LimitWait, s.limits.LimitQueue)
	s.limiter.maxReset = s.limits.LimitMaxWait
	if wo, ok := opts.Observer.(WaitObserver); ok {
		s.limiter.onWait = wo.Waited
	}
	s.limiter.load(filepath.Join(s.dir, limitsName), s.log)
	s.conns = svclisten.NewConns("model gateway", s.limits.MaxConns, s.limits.MaxConnsPerPeer, s.log)
	s.listen = s.newListeners()
	tr := opts.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxResponseHeaderBytes = s.limits.MaxAnswerHeaderBytes
		t.ResponseHeaderTimeout = 10 * time.Minute
		tr = t
	}
	s.proxy = s.newProxy(tr)
	if err := s.writeBundle(); err != nil {
		return nil, err
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	s.listen.Start(opts.SweepInterval)
	return s, nil
}

// Providers names the providers whose keys the gateway holds, sorted.
func (s *Service) Providers() []string {
	seen := map[string]bool{}
	for k := range s.keys {
		seen[s.owner[k]] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// Grant gives container sb a fresh placeholder for each
// model key, valid through gateway (its network's, given to ListenOn) and
// from the first address that uses it. With gateway "" the container has
// no network: the placeholders work only through its own socket
// (ServeSandbox), and its base URLs name SandboxPort on its loopback. A
// new Grant replaces the container's placeholders; through the same
// gateway those of the grant before stay valid (one grant back). With no
// keys it returns an empty Grant.
func (s *Service) Grant(sb contract.Sandbox, gateway string) (Grant, error) {
	if len(s.keys) == 0 {
		return Grant{}, nil
	}
	ip := gateway
	if a := net.ParseIP(gateway); a != nil {
		ip = a.String()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	base := "https://" + net.JoinHostPort(loopback, strconv.Itoa(SandboxPort)) + "/"
	if gateway != "" {
		port := s.listen.PortLocked(ip)
		if port == 0 {
			return Grant{}, fmt.Errorf("model gateway: not listening on %q (the sandbox network's gateway; on a cluster set git.address)", gateway)
		}
		base = "https://" + net.JoinHostPort(ip, strconv.Itoa(port)) + "/"
	}
	var earlier []*record
	for _, r := range s.byHash {
		if r.sandbox() == sb && !r.Earlier && r.Gateway == ip {
			earlier = append(earlier, r)
		}
	}
	s.revokeLocked(sb)
	for _, r := range earlier {
		r.Earlier = true
		s.byHash[r.Hash] = r
	}
	env := map[string]string{contract.EnvGatewayURL: base}
	for _, v := range slices.Sorted(maps.Keys(s.keys)) {
		p := s.providers[s.owner[v]]
		ph, err := newPlaceholder()
		if err != nil {
			return Grant{}, err
		}
		rec := &record{Swarm: sb.Swarm, Container: sb.Container, Var: v, Provider: p.Name, Hash: hash(ph), Gateway: ip}
		s.byHash[rec.Hash] = rec
		env[v] = ph
		for _, b := range p.BaseURLEnv {
			env[b] = base + p.Name
		}
	}
	if err := s.saveLocked(); err != nil {
		s.revokeLocked(sb)
		return Grant{}, err
	}
	s.log.Info("model access granted", "container", sb.Container, "swarm", sb.Swarm, "providers", s.Providers())
	return Grant{Env: env, CAFile: s.caFile, BundleFile: filepath.Join(s.dir, bundleName)}, nil
}

// Revoke ends the placeholders of container sb (it ended or was
// removed).
func (s *Service) Revoke(sb contract.Sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.met.forget(sb)
	if s.revokeLocked(sb) == 0 {
		return
	}
	if err := s.saveLocked(); err != nil {
		s.log.Warn("model access revoked in memory only: could not persist it", "container", sb.Container, "err", err)
	}
	s.log.Info("model access revoked", "container", sb.Container, "swarm", sb.Swarm)
}

func (s *Service) revokeLocked(sb contract.Sandbox) int {
	n := 0
	for h, r := range s.byHash {
		if r.sandbox() == sb {
			delete(s.byHash, h)
			n++
		}
	}
	return n
}

// admit finds the record of placeholder ph and checks that r comes through
// its gateway and from its container's address (the first that used it).
func (s *Service) admit(r *http.Request, ph string) (record, string) {
	if ph == "" {
		return record{}, "no placeholder"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.byHash[hash(ph)]
	if rec == nil {
		return record{}, "unknown or revoked placeholder"
	}
	if sb, ok := svclisten.SandboxOf(r.Context()); ok {
		// Through a container's own socket: it says who is asking.
		if rec.Gateway != "" || sb != (rec.sandbox()) {
			return record{}, "placeholder of another container"
		}
		return *rec, ""
	}
	if rec.Gateway == "" {
		return record{}, "placeholder of a container without a network, used from a network"
	}
	peer, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return record{}, "no peer address"
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if host, _, err := net.SplitHostPort(la.String()); err != nil || host != rec.Gateway {
			return record{}, "placeholder of another network"
		}
	}
	if rec.Peer == "" {
		rec.Peer = peer
		if err := s.saveLocked(); err != nil {
			s.log.Warn("could not persist the address a placeholder is bound to", "container", rec.Container, "err", err)
		}
	} else if rec.Peer != peer {
		return record{}, "placeholder of another container"
	}
	return *rec, ""
}

func (s *Service) load() error {
	data, err := os.ReadFile(filepath.Join(s.dir, grantsName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the model gateway's grants: %w", err)
	}
	var p persisted
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("model gateway grants %s are corrupt: %w (move the file away; running containers then lose model access)", filepath.Join(s.dir, grantsName), err)
	}
	s.listen.Restore(p.Addresses)
	for _, r := range p.Records {
		// A key variable no longer configured has no key to put in.
		if r != nil && r.Hash != "" && s.keys[r.Var] != "" {
			s.byHash[r.Hash] = r
		}
	}
	return nil
}

func (s *Service) saveLocked() error {
	p := persisted{Addresses: s.listen.SavedLocked(), Records: make([]*record, 0, len(s.byHash))}
	for _, h := range slices.Sorted(maps.Keys(s.byHash)) {
		p.Records = append(p.Records, s.byHash[h])
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the model gateway's grants: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(s.dir, grantsName), data, 0o600); err != nil {
		return fmt.Errorf("write the model gateway's grants: %w", err)
	}
	return nil
}

// systemRoots are where Linux distributions keep their trust store (Go's
// own list).
var systemRoots = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// writeBundle writes the host's trust store with the daemon's CA appended:
// SSL_CERT_FILE and REQUESTS_CA_BUNDLE replace a program's whole store, and
// the sandbox must still trust public hosts (through the egress proxy).
func (s *Service) writeBundle() error {
	var b bytes.Buffer
	for _, p := range systemRoots {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		_, err = io.Copy(&b, io.LimitReader(f, 8<<20))
		f.Close()
		if err == nil {
			break
		}
		b.Reset()
	}
	if b.Len() > 0 && !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
		b.WriteByte('\n')
	}
	b.Write(s.ca.CertPEM)
	if err := atomicfile.WriteFile(filepath.Join(s.dir, bundleName), b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write the sandbox CA bundle: %w", err)
	}
	return nil
}

func newPlaceholder() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate a model key placeholder: %w", err)
	}
	return prefix + hex.EncodeToString(b[:]), nil
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// upstreamURL joins a provider's base and the path under it.
func upstreamURL(base *url.URL, rest string, query url.Values) *url.URL {
	u := *base
	u.Path = base.Path + rest
	u.RawPath = ""
	u.RawQuery = query.Encode()
	return &u
}
