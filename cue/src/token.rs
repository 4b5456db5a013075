//! Lexical tokens of CUE (`doc/ref/spec.md`, "Tokens" through "String and byte sequence literals";
//! upstream `cue/token`).
//!
//! Rules:
//! - Keywords (`package import for in if let true false null`) are scanned as [`TokenKind::Ident`];
//!   the parser decides from context whether they act as keywords, since all of them may be labels.
//! - A token carries only its kind and [`Span`]; its text is the source slice of the span. Literal
//!   decoding (numbers, escapes, multi-line indentation) happens in the parser.
//! - An interpolated string is split into segments: [`TokenKind::InterpStart`] (from the opening
//!   quote through `\(`), zero or more [`TokenKind::InterpMid`] (from after the closing `)` through
//!   the next `\(`) and a final [`TokenKind::InterpEnd`] (through the closing quote); the
//!   interpolated expressions' tokens come in between.

use crate::source::Span;

/// The kind of a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// End of input.
    Eof,
    /// A character that starts no token; an error was reported.
    Illegal,
    /// `,` (written, or inserted at a line end).
    Comma,
    /// An identifier or keyword: `x`, `#D`, `_h`, `_#hd`, `$v`, `if`, `true`.
    Ident,
    /// An integer literal, possibly with a multiplier (`1Ki`, `1.5K` are integers).
    Int,
    /// A decimal floating-point literal.
    Float,
    /// A complete string or bytes literal without interpolation.
    String,
    /// The first segment of an interpolated literal, ending with `\(`.
    InterpStart,
    /// A middle segment of an interpolated literal, from after `)` through the next `\(`.
    InterpMid,
    /// The last segment of an interpolated literal, from after `)` through the closing quote.
    InterpEnd,
    /// An attribute `@name(...)`, kept raw.
    Attribute,
    /// `_|_`
    Bottom,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Quo,
    /// `&`
    And,
    /// `|`
    Or,
    /// `&&`
    Land,
    /// `||`
    Lor,
    /// `!`
    Not,
    /// `==`
    Eql,
    /// `!=`
    Neq,
    /// `<`
    Lss,
    /// `<=`
    Leq,
    /// `>`
    Gtr,
    /// `>=`
    Geq,
    /// `=~`
    Mat,
    /// `!~`
    Nmat,
    /// `=`
    Assign,
    /// `:`
    Colon,
    /// `?`
    Option,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `[`
    LBrack,
    /// `]`
    RBrack,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `.`
    Period,
    /// `...`
    Ellipsis,
}

impl TokenKind {
    /// How the token is named in error messages (`'}'`, `identifier`, `EOF`), as upstream does.
    pub fn describe(self) -> &'static str {
        use TokenKind::*;
        match self {
            Eof => "EOF",
            Illegal => "ILLEGAL",
            Comma => "','",
            Ident => "identifier",
            Int => "integer literal",
            Float => "float literal",
            String => "string literal",
            InterpStart | InterpMid | InterpEnd => "interpolation",
            Attribute => "attribute",
            Bottom => "'_|_'",
            Add => "'+'",
            Sub => "'-'",
            Mul => "'*'",
            Quo => "'/'",
            And => "'&'",
            Or => "'|'",
            Land => "'&&'",
            Lor => "'||'",
            Not => "'!'",
            Eql => "'=='",
            Neq => "'!='",
            Lss => "'<'",
            Leq => "'<='",
            Gtr => "'>'",
            Geq => "'>='",
            Mat => "'=~'",
            Nmat => "'!~'",
            Assign => "'='",
            Colon => "':'",
            Option => "'?'",
            LParen => "'('",
            RParen => "')'",
            LBrack => "'['",
            RBrack => "']'",
            LBrace => "'{'",
            RBrace => "'}'",
            Period => "'.'",
            Ellipsis => "'...'",
        }
    }

    /// `true` if a newline after this token inserts a comma (spec "Commas").
    pub fn inserts_comma(self) -> bool {
        use TokenKind::*;
        matches!(
            self,
            Ident
                | Int
                | Float
                | String
                | InterpEnd
                | Attribute
                | Bottom
                | RParen
                | RBrack
                | RBrace
                | Option
                | Ellipsis
        )
    }
}

/// One token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    /// What it is.
    pub kind: TokenKind,
    /// Where it is. An inserted comma has an empty span at the line end.
    pub span: Span,
    /// `true` for a comma inserted at a newline or at the end of input.
    pub inserted: bool,
}

/// The keywords of CUE. All of them may still be used as labels.
pub const KEYWORDS: &[&str] = &[
    "package", "import", "for", "in", "if", "let", "true", "false", "null",
];
