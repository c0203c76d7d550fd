// Package filter parses and evaluates the SQL filters of topic
// subscription rules, after Azure Service Bus's SqlFilter.
//
// A filter is a boolean expression over a message's properties, never its
// body. Parse it once and Match it against many messages:
//
//	e, err := filter.Parse("color = 'red' AND quantity > 10 OR sys.Subject LIKE 'order.%'")
//	if err != nil { ... } // errors.Is(err, filter.ErrSyntax)
//	ok, err := e.Match(filter.Properties{
//		System: filter.SystemProperties{Subject: "order.created"},
//		App:    map[string]string{"color": "red", "quantity": "12"},
//	})
//	if err != nil { ... } // errors.Is(err, filter.ErrEvaluation): dead-letter the message
//
// An *Expr is immutable: Match may be called from many goroutines at once.
//
// # Grammar
//
// Keywords are case-insensitive and whitespace is free-form.
//
//	condition  = term { OR term }
//	term       = factor { AND factor }
//	factor     = NOT factor | "(" condition ")" | predicate | TRUE | FALSE
//	predicate  = operand ( "=" | "<>" | "!=" | "<" | ">" | "<=" | ">=" ) operand
//	           | operand [NOT] IN "(" literal { "," literal } ")"
//	           | operand [NOT] LIKE string [ESCAPE string]
//	           | operand IS [NOT] NULL
//	operand    = property | literal
//	property   = name | user "." name | sys "." name
//	name       = identifier | "[" text "]"       (a "]" in text is written "]]")
//	literal    = string | number | TRUE | FALSE | NULL
//
// NOT binds tighter than AND, which binds tighter than OR. An identifier
// starts with a letter or underscore and goes on with letters, digits and
// underscores; a keyword (AND, OR, NOT, IN, LIKE, ESCAPE, IS, NULL, TRUE,
// FALSE) can name a property only in brackets, [and], as can any name that
// is not an identifier, [my-prop.name]. A string is in single quotes, a
// quote inside it written twice. A number is an optional minus sign,
// digits, an optional fraction and an optional exponent: 10, -5, 2.5, 1e6.
// An IN list holds literals only. Arithmetic, functions and EXISTS are not
// supported.
//
// # Properties
//
// A name alone, or after user., is an application property, looked up in
// Properties.App by its exact (case-sensitive) name; an absent property is
// NULL. A name after sys. is a system property, matched case-insensitively
// among MessageId, CorrelationId, Subject (alias Label), To, ReplyTo,
// ReplyToSessionId, SessionId, PartitionKey and ContentType; any other
// sys. name is a syntax error. A system property that is the empty string
// is NULL, since an empty string is how a message leaves it unset.
//
// # Semantics
//
// Every property value is a string; what a comparison means depends on
// the other side:
//
//   - Against a number literal, the value is parsed as a decimal number
//     (optional sign, digits, optional fraction and exponent; no spaces,
//     no NaN or Inf). Two integers that fit in int64 compare exactly;
//     otherwise both sides compare as float64. A value that is not a
//     number is an evaluation error.
//   - Against a string literal or another property, strings compare byte
//     by byte (like Go's < on strings), case-sensitively.
//   - Against TRUE or FALSE, the value must be "true" or "false" in any
//     case, or it is an evaluation error; booleans compare only with = and
//     <>, anything else is a syntax error.
//
// Two literals compare by the same rules but must be of the same kind (a
// string with a number is a syntax error), so 1 = 1 and 'a' < 'b' are
// conditions.
//
// Logic is SQL's three-valued logic. A comparison, IN or LIKE whose
// operand is NULL is UNKNOWN; NOT UNKNOWN is UNKNOWN; FALSE AND UNKNOWN is
// FALSE, TRUE OR UNKNOWN is TRUE, and otherwise AND and OR with UNKNOWN
// are UNKNOWN. x IN (a, b) is x = a OR x = b, so a NULL item makes a
// non-matching IN UNKNOWN, and NOT IN its negation. IS NULL and IS NOT
// NULL are never UNKNOWN. Match reports true only when the whole filter is
// TRUE.
//
// LIKE matches a string against a pattern in which % stands for any run of
// characters (also none) and _ for exactly one character (a Unicode code
// point; each byte of invalid UTF-8 counts as one). ESCAPE names a single
// character that makes the following %, _ or escape character literal; the
// escape character followed by anything else is a syntax error. The left
// side of LIKE must be a property or a string literal. Matching takes time
// proportional to the value's length times the pattern's, never more.
//
// A property or literal is not a condition on its own: "WHERE flag" is a
// syntax error that suggests flag = TRUE. TRUE and FALSE alone are
// conditions.
//
// Evaluation goes left to right and stops as soon as the outcome is known
// (AND at the first FALSE, OR at the first TRUE, IN at the first equal
// item), so an operand that would have failed is not reached then. An
// evaluation error wraps ErrEvaluation; the caller dead-letters the
// message.
//
// # Limits
//
// A filter is at most MaxLength bytes of valid UTF-8, and parentheses and
// NOTs nest at most MaxDepth deep, so a hostile filter can neither exhaust
// the stack nor take more than linear time to parse. Its canonical form
// (Expr.String) must also fit in MaxLength bytes, so that it can always be
// parsed again. Going over a limit is an error that wraps both ErrSyntax
// and ErrTooComplex.
package filter
