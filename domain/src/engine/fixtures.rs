//! Engine definitions the unit tests of this crate share.

/// A source engine with one define knob.
pub const MINNOW: &str = r#"
name = "minnow"
protocol = "uci"
binary = "minnow"
options = { Hash = 16, Threads = 1 }
[source]
path = "../../engines/minnow"
[build]
command = ["make", "-s", "-C", "{source}", "DEFINES={defines}", "OUT={out}"]
[[knobs]]
name = "NULLMOVE_R_BASE"
min = 1
max = 6
default = 3
"#;

/// A binary-only engine with two option knobs.
pub const BINARY: &str = r#"
name = "fish"
protocol = "uci"
binary = "/usr/games/stockfish"
options = { Threads = 1 }
[[knobs]]
name = "Hash"
kind = "option"
min = 1
max = 64
default = 16
[[knobs]]
name = "Skill"
kind = "option"
option = "Skill Level"
min = 0
max = 20
default = 20
"#;
