package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"

	"connectrpc.com/connect/v2"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/internal/apierr"
)

// Action is what a key may do to an entity: a set of permissions.
type Action uint8

// Permissions. Send sends to queues and topics; Receive receives, peeks
// and settles messages and holds sessions; Manage creates, changes and
// deletes entities, moves and purges dead letters, and reads statistics
// and the cluster's status.
const (
	Send Action = 1 << iota
	Receive
	Manage

	// All is every permission.
	All = Send | Receive | Manage
)

// ParseAction parses a permission's name: send, receive, manage or all.
func ParseAction(s string) (Action, error) {
	switch s {
	case "send":
		return Send, nil
	case "receive":
		return Receive, nil
	case "manage":
		return Manage, nil
	case "all":
		return All, nil
	}
	return 0, fmt.Errorf("unknown permission %q (want send, receive, manage or all)", s)
}

func (a Action) String() string {
	var names []string
	for _, p := range []struct {
		a    Action
		name string
	}{{Send, "send"}, {Receive, "receive"}, {Manage, "manage"}} {
		if a&p.a != 0 {
			names = append(names, p.name)
		}
	}
	return strings.Join(names, "+")
}

// ClusterEntity is the name a grant names to let a key read the
// cluster's status with Manage ("*" covers it too).
const ClusterEntity = "$cluster"

// Grant gives permissions on entities: each pattern is an entity's name
// (a queue, a topic, a subscription's path "topic/Subscriptions/name"),
// or a prefix ending in '*' ("orders-*", "billing/Subscriptions/*", "*").
// '*' stands only at a pattern's end: New refuses "orders*eu", which
// would otherwise be a name nobody has.
type Grant struct {
	Actions  Action
	Entities []string
}

// Key is a client's credential: a bearer token, the grants it carries,
// and a rate limit.
type Key struct {
	// Name names the key in logs.
	Name string
	// Token is the secret a client sends as "Authorization: Bearer
	// <token>"; or TokenSHA256, its SHA-256 digest in hex, so that the
	// configuration need not hold the secret.
	Token       string
	TokenSHA256 string
	Grants      []Grant
	// RatePerSecond and Burst bound the key's calls (0: unlimited); a
	// call beyond them fails with RESOURCE_EXHAUSTED.
	RatePerSecond float64
	Burst         int
	// MaxStreams bounds the Consume and Tail streams open with the key at
	// once (0: DefaultKeyMaxStreams; negative: no bound of the key's own,
	// Config.MaxStreams still holds): one more fails with
	// RESOURCE_EXHAUSTED.
	MaxStreams int
	// MaxWaits bounds the calls waiting with the key at once: receives
	// and session accepts with a max_wait (0: DefaultKeyMaxWaits;
	// negative: no bound). One more fails with RESOURCE_EXHAUSTED; a call
	// that does not wait is not counted.
	MaxWaits int
	// MaxConnections bounds the connections that carry the key's calls at
	// once (0: DefaultKeyMaxConnections; negative: no bound of the key's
	// own, Config.MaxConnections still holds). A connection counts from
	// the first call with the key on it until it closes; a call that would
	// be one connection too many fails with RESOURCE_EXHAUSTED
	// TOO_MANY_CONNECTIONS, and an HTTP/1.1 connection is closed after it
	// (an HTTP/2 one may carry other calls: they go on).
	MaxConnections int
	// MaxConsumers bounds the consumers whose stream nodes the key's
	// Consume calls started on the server and that still run (0: a
	// quarter of Config.MaxConsumers, at least 1; negative: no bound of
	// the key's own). A Consume that would start one more fails with
	// RESOURCE_EXHAUSTED TOO_MANY_CONSUMERS; joining a consumer already
	// running is not counted.
	MaxConsumers int
}

// allows reports whether the key may act on entity. Names are
// case-insensitive (sluice.CanonicalName), and so are grants: a name and
// a pattern are compared in lower case.
func (k *Key) allows(a Action, entity string) bool {
	entity = strings.ToLower(entity)
	for _, g := range k.Grants {
		if g.Actions&a != a {
			continue
		}
		for _, p := range g.Entities {
			p = strings.ToLower(p)
			if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(entity, prefix) || p == entity {
				return true
			}
		}
	}
	return false
}

// reachesUnder reports whether the key has a permission on some entity
// whose name starts with prefix.
func (k *Key) reachesUnder(prefix string) bool {
	prefix = strings.ToLower(prefix)
	for _, g := range k.Grants {
		if g.Actions == 0 {
			continue
		}
		for _, p := range g.Entities {
			p = strings.ToLower(p)
			if pre, ok := strings.CutSuffix(p, "*"); ok && (strings.HasPrefix(prefix, pre) || strings.HasPrefix(pre, prefix)) ||
				strings.HasPrefix(p, prefix) {
				return true
			}
		}
	}
	return false
}

// validate checks a key and returns its token's digest.
func (k *Key) validate() ([sha256.Size]byte, error) {
	var digest [sha256.Size]byte
	switch {
	case k.Name == "":
		return digest, fmt.Errorf("a key has no name")
	case k.Token != "" && k.TokenSHA256 != "":
		return digest, fmt.Errorf("key %q: set token or token_sha256, not both", k.Name)
	case k.Token != "":
		if len(k.Token) < 16 {
			return digest, fmt.Errorf("key %q: a token of %d characters is too easy to guess (use at least 16)", k.Name, len(k.Token))
		}
		digest = sha256.Sum256([]byte(k.Token))
	case k.TokenSHA256 != "":
		b, err := hex.DecodeString(k.TokenSHA256)
		if err != nil || len(b) != sha256.Size {
			return digest, fmt.Errorf("key %q: token_sha256 must be 64 hex digits", k.Name)
		}
		copy(digest[:], b)
	default:
		return digest, fmt.Errorf("key %q has no token", k.Name)
	}
	if k.RatePerSecond < 0 || k.Burst < 0 {
		return digest, fmt.Errorf("key %q: negative rate limit", k.Name)
	}
	for _, g := range k.Grants {
		if g.Actions == 0 || g.Actions&^All != 0 {
			return digest, fmt.Errorf("key %q: a grant needs permissions: send, receive, manage or all", k.Name)
		}
		if len(g.Entities) == 0 {
			return digest, fmt.Errorf("key %q: a grant of %s names no entity (name one, a prefix ending in '*', or \"*\" for all)", k.Name, g.Actions)
		}
		for _, p := range g.Entities {
			if err := checkPattern(p); err != nil {
				return digest, fmt.Errorf("key %q: %w", k.Name, err)
			}
		}
	}
	return digest, nil
}

// checkPattern checks a grant's entity pattern: a name, or a prefix
// ending in '*', of the characters names have ('$' only first, as in
// "$cluster"), so that a pattern can match something.
func checkPattern(p string) error {
	switch i := strings.IndexByte(p, '*'); {
	case p == "":
		return fmt.Errorf("an empty entity pattern in a grant (name an entity, a prefix ending in '*', or \"*\" for all)")
	case strings.TrimSpace(p) != p:
		return fmt.Errorf("entity pattern %q has spaces at its ends, which no name has: remove them", p)
	case i >= 0 && i != len(p)-1:
		return fmt.Errorf("entity pattern %q: '*' stands only at the end of a pattern, for every name starting with what comes "+
			"before it (%q); list the names, or grant a prefix", p, p[:i]+"*")
	}
	for i, c := range []byte(strings.TrimSuffix(p, "*")) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".-_/", c) >= 0 || c == '$' && i == 0) {
			return fmt.Errorf("entity pattern %q holds %q, which no entity name has (names are letters, digits, '.', '-', '_' and '/'): "+
				"name the entities, or a prefix ending in '*'", p, c)
		}
	}
	return nil
}

// keyring holds the configured keys; nil when the server runs without
// authentication.
type keyring struct {
	keys []*authKey
}

type authKey struct {
	*Key
	digest  [sha256.Size]byte
	limiter *rate.Limiter // nil: unlimited

	maxStreams, maxWaits, maxConns, maxConsumers int

	mu        sync.Mutex
	streams   int // Consume and Tail streams open with the key
	waits     int // calls waiting with the key
	conns     int // connections that carried the key's calls, open
	consumers int // consumers the key's Consume calls started, running
}

// newKeyring checks the keys and returns their ring; maxConsumers is the
// server's bound, of which a key takes a quarter by default.
func newKeyring(keys []Key, maxConsumers int) (*keyring, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	kr := &keyring{}
	seen := make(map[[sha256.Size]byte]string)
	names := make(map[string]bool)
	for i := range keys {
		k := &keys[i]
		digest, err := k.validate()
		if err != nil {
			return nil, err
		}
		if names[k.Name] {
			return nil, fmt.Errorf("two keys are named %q: give each key a name of its own (logs and errors name keys)", k.Name)
		}
		names[k.Name] = true
		if other, ok := seen[digest]; ok {
			return nil, fmt.Errorf("keys %q and %q have the same token", other, k.Name)
		}
		seen[digest] = k.Name
		ak := &authKey{Key: k, digest: digest}
		ak.maxStreams = cmp.Or(k.MaxStreams, DefaultKeyMaxStreams)
		ak.maxWaits = cmp.Or(k.MaxWaits, DefaultKeyMaxWaits)
		ak.maxConns = cmp.Or(k.MaxConnections, DefaultKeyMaxConnections)
		ak.maxConsumers = cmp.Or(k.MaxConsumers, max(maxConsumers/4, 1))
		if k.RatePerSecond > 0 {
			ak.limiter = rate.NewLimiter(rate.Limit(k.RatePerSecond), max(k.Burst, 1))
		}
		kr.keys = append(kr.keys, ak)
	}
	return kr, nil
}

// find returns the key whose token is given, comparing digests in
// constant time.
func (kr *keyring) find(token string) *authKey {
	digest := sha256.Sum256([]byte(token))
	var found *authKey
	for _, k := range kr.keys {
		if subtle.ConstantTimeCompare(digest[:], k.digest[:]) == 1 {
			found = k
		}
	}
	return found
}

type keyCtx struct{}

// authenticate is the server's first interceptor: with keys configured,
// a call must carry a known bearer token, within its key's rate limit
// and its bound on connections, and the key must hold the permission
// the call needs on some entity, before any payload is read. Each
// refusal, its own or the handler's PERMISSION_DENIED, is logged (at a
// bounded rate).
func (s *Server) authenticate(next connect.ServerFunc) connect.ServerFunc {
	return func(ctx context.Context, spec connect.Spec, stream connect.ServerStream) error {
		if s.keys == nil {
			return next(ctx, spec, stream)
		}
		info, _ := connect.CallInfoForServerContext(ctx)
		k, err := s.keys.admit(info.RequestHeader().Get("Authorization"))
		if err != nil {
			return s.refusedUnread(ctx, k, err)
		}
		if err := holdConnection(ctx, k); err != nil {
			return s.refusedUnread(ctx, k, err)
		}
		if a := procedureNeeds[spec.Procedure]; !k.holdsAny(a) {
			return s.refusedUnread(ctx, k, denied(k, grantless(a)))
		}
		err = next(context.WithValue(ctx, keyCtx{}, k), spec, stream)
		if connect.CodeOf(err) == connect.CodePermissionDenied {
			// The handler's refusal: the permission on the entity it names.
			s.refused(ctx, k, err)
		}
		return err
	}
}

// admit authenticates a request by its Authorization header, for API
// calls and /metrics alike: the key its bearer token names, within the
// key's rate limit. It fails with UNAUTHENTICATED (no bearer token, or
// an unknown one: the key is nil then) or RESOURCE_EXHAUSTED
// RATE_LIMITED (with the key).
func (kr *keyring) admit(authorization string) (*authKey, error) {
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || token == "" {
		return nil, connect.NewError(connect.CodeUnauthenticated, `missing credentials: send "Authorization: Bearer <token>"`)
	}
	k := kr.find(token)
	if k == nil {
		return nil, connect.NewError(connect.CodeUnauthenticated, "unknown token")
	}
	if k.limiter != nil && !k.limiter.Allow() {
		return k, apierr.New(connect.CodeResourceExhausted, "RATE_LIMITED",
			fmt.Sprintf("key %q is over its rate limit of %g calls a second", k.Name, k.RatePerSecond))
	}
	return k, nil
}

// authorize fails with PERMISSION_DENIED unless the call's key may act on
// entity (every call may, without keys). Each call that acts on an entity
// asks, so it also records the entity on the call's span.
func (s *Server) authorize(ctx context.Context, a Action, entity string) error {
	s.traceEntity(ctx, entity)
	if s.keys == nil {
		return nil
	}
	k, _ := ctx.Value(keyCtx{}).(*authKey)
	if k != nil && k.allows(a, entity) {
		return nil
	}
	return denied(k, fmt.Sprintf("%s %q", a, entity))
}

// denied is the PERMISSION_DENIED of a call whose key (nil: none) may not
// do what says.
func denied(k *authKey, what string) error {
	name := "anonymous"
	if k != nil {
		name = k.Name
	}
	return connect.NewError(connect.CodePermissionDenied, fmt.Sprintf("key %q may not %s", name, what))
}

// authorizeAny fails with PERMISSION_DENIED unless the call's key may act
// on one of entities; what names them in the message.
func (s *Server) authorizeAny(ctx context.Context, a Action, entities []string, what string) error {
	if s.keys == nil {
		return nil
	}
	k, _ := ctx.Value(keyCtx{}).(*authKey)
	if k != nil && slices.ContainsFunc(entities, func(e string) bool { return k.allows(a, e) }) {
		return nil
	}
	return denied(k, fmt.Sprintf("%s %s", a, what))
}

// holdStream counts a server stream against the call's key's bound, and
// returns what gives it back; it fails with RESOURCE_EXHAUSTED past the
// bound. Calls without a key are not counted: MaxConsumers bounds them.
func (s *Server) holdStream(ctx context.Context) (release func(), err error) {
	k, _ := ctx.Value(keyCtx{}).(*authKey)
	if k == nil {
		return func() {}, nil
	}
	return k.hold(&k.streams, k.maxStreams, "TOO_MANY_STREAMS", "Consume and Tail streams open", "")
}

// holdWait counts a waiting call against the call's key's bound, and
// returns what gives it back; it fails with RESOURCE_EXHAUSTED past the
// bound.
func (s *Server) holdWait(ctx context.Context) (release func(), err error) {
	k, _ := ctx.Value(keyCtx{}).(*authKey)
	if k == nil {
		return func() {}, nil
	}
	return k.hold(&k.waits, k.maxWaits, "TOO_MANY_WAITS", "calls waiting", ": call without max_wait, or wait for one to end")
}

// holdConsumer counts a consumer that a Consume with key (nil: none)
// starts against the key's share of the server's consumers, and returns
// what gives its place back; it fails with RESOURCE_EXHAUSTED past the
// share.
func holdConsumer(k *authKey) (release func(), err error) {
	if k == nil {
		return func() {}, nil
	}
	return k.hold(&k.consumers, k.maxConsumers, "TOO_MANY_CONSUMERS", "consumers running on this server, started by its Consume calls",
		": stop one (its last stream closes), or raise the key's max_consumers")
}

// hold counts one more in count, one of the key's counters, unless it is
// at bound (negative: none): then it fails with RESOURCE_EXHAUSTED and
// reason, its message naming what is counted and ending with hint. The
// returned func gives it back.
func (k *authKey) hold(count *int, bound int, reason, what, hint string) (release func(), err error) {
	if bound < 0 {
		return func() {}, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if *count >= bound {
		return nil, apierr.New(connect.CodeResourceExhausted, reason,
			fmt.Sprintf("key %q holds %d %s, at most %d allowed%s", k.Name, *count, what, bound, hint))
	}
	*count++
	return func() {
		k.mu.Lock()
		*count--
		k.mu.Unlock()
	}, nil
}

// authorizeUnder fails with PERMISSION_DENIED unless the call's key has a
// permission on parent or on an entity under it (a name starting with
// prefix); what names the call gets in its message. A call that lists
// what is under an entity asks first, so that a key with no permission
// there cannot tell whether the entity exists.
func (s *Server) authorizeUnder(ctx context.Context, what, parent, prefix string) error {
	s.traceEntity(ctx, parent)
	if s.keys == nil || s.permitted(ctx, parent) {
		return nil
	}
	k, _ := ctx.Value(keyCtx{}).(*authKey)
	if k != nil && k.reachesUnder(prefix) {
		return nil
	}
	return denied(k, fmt.Sprintf("%s %q", what, parent))
}

// permitted reports whether the call's key has any permission on entity:
// listings show only those.
func (s *Server) permitted(ctx context.Context, entity string) bool {
	if s.keys == nil {
		return true
	}
	k, _ := ctx.Value(keyCtx{}).(*authKey)
	return k != nil && (k.allows(Send, entity) || k.allows(Receive, entity) || k.allows(Manage, entity))
}

// keyAllows reports whether k (nil: a call without a key) may act on
// entity: any call may, without keys.
func (s *Server) keyAllows(k *authKey, a Action, entity string) bool {
	return s.keys == nil || k != nil && k.allows(a, entity)
}
