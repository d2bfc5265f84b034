//! What the output streams are: a terminal gets colour, progress bars and
//! in-place redraws; a pipe or a file gets plain text only.
//!
//! Colour follows <https://no-color.org>: never when `NO_COLOR` is set to
//! anything but the empty string, else only on a terminal.

use std::io::IsTerminal;

/// True when stdout is a terminal.
pub(crate) fn stdout_is_terminal() -> bool {
    std::io::stdout().is_terminal()
}

/// True when stderr is a terminal.
pub(crate) fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// True when a stream that `is_terminal` may be coloured.
pub(crate) fn colour(is_terminal: bool) -> bool {
    is_terminal && !no_color(std::env::var_os("NO_COLOR").as_deref())
}

/// True when `NO_COLOR` (its value, if set) turns colour off.
fn no_color(value: Option<&std::ffi::OsStr>) -> bool {
    value.is_some_and(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_color_set_to_anything_but_empty_turns_colour_off() {
        assert!(!no_color(None));
        assert!(!no_color(Some("".as_ref())));
        assert!(no_color(Some("1".as_ref())));
        assert!(no_color(Some("false".as_ref())));
        assert!(!colour(false), "never on a pipe");
    }
}
