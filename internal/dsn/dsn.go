// Package dsn masks the credentials of database DSNs, for every message
// that shows one.
package dsn

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask stands for a credential that was removed.
const Mask = "xxxxx"

// passwordParam matches a key=value setting whose key names a password
// (password, sslpassword, passwd...), in a libpq keyword/value DSN or a
// URL's query, with its value: quoted ('...', with \' and \\ escapes) or
// up to the next space or '&'.
var passwordParam = regexp.MustCompile(`(?i)(\b[a-z_]*pass[a-z_]*\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:[^\s&\\]|\\.)*)`)

// driverDSN matches a DSN in go-sql-driver/mysql's own form with
// credentials: user:password@net(address)/db or user:password@/db.
var driverDSN = regexp.MustCompile(`^[^/]*:.*@[a-z0-9]*(\(.*\))?/`)

// Redact returns dsn with its credentials masked, whatever its form:
//
//   - a URL (postgres://user:pass@host/db?sslpassword=..., mysql://...):
//     the userinfo's password and every password query parameter;
//   - a libpq keyword/value DSN (host=h password=secret, or 'quoted'):
//     each password setting's value;
//   - go-sql-driver/mysql's form (user:pass@tcp(host:3306)/db): the
//     password, everything between the user's ':' and the last '@'
//     before the database, as the driver reads it;
//   - a SQLite path (sqlite://..., file:..., or a bare path): unchanged.
//
// A malformed DSN is masked from the user's ':' to the last '@', which
// may hide more than the password, never less.
func Redact(dsn string) string {
	scheme, rest, isURL := strings.Cut(dsn, "://")
	switch {
	case isURL && (scheme == "sqlite" || scheme == "sqlite3" || scheme == "file"):
		return dsn
	case isURL:
		return scheme + "://" + redactURL(scheme, rest)
	case strings.HasPrefix(dsn, "file:"):
		return dsn
	case driverDSN.MatchString(dsn):
		return redactDriverDSN(dsn)
	}
	return passwordParam.ReplaceAllString(dsn, "${1}"+Mask)
}

// redactURL masks the credentials of a URL's part after "scheme://".
func redactURL(scheme, rest string) string {
	u, err := url.Parse(scheme + "://" + rest)
	if err == nil && !strings.Contains(u.Host+u.Path+u.RawQuery+u.Fragment, "@") {
		// The URL's parts are certain: mask its password and its query's.
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Mask)
		}
		if u.RawQuery != "" {
			u.RawQuery = passwordParam.ReplaceAllString(u.RawQuery, "${1}"+Mask)
		}
		out := strings.TrimPrefix(u.String(), scheme+"://")
		return strings.Replace(out, ":"+url.QueryEscape(Mask)+"@", ":"+Mask+"@", 1)
	}
	// Malformed, or an '@' outside the userinfo: a password with '/',
	// '?' or '@' unescaped, say. Mask from the user's ':' to the last '@'.
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		if user, _, has := strings.Cut(rest[:at], ":"); has {
			rest = user + ":" + Mask + rest[at:]
		}
	}
	return passwordParam.ReplaceAllString(rest, "${1}"+Mask)
}

// redactDriverDSN masks the password of a go-sql-driver/mysql DSN: the
// driver takes the last '/' for the database's, the last '@' before it
// for the userinfo's end, and the first ':' for the user's.
func redactDriverDSN(dsn string) string {
	slash := strings.LastIndexByte(dsn, '/')
	at := strings.LastIndexByte(dsn[:slash], '@')
	if at < 0 {
		return dsn
	}
	user, _, has := strings.Cut(dsn[:at], ":")
	if !has {
		return dsn
	}
	return user + ":" + Mask + dsn[at:]
}
