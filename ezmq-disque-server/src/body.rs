//! Job bodies: up to [`INLINE_MAX`] bytes are stored inside the job itself
//! (no allocation), longer ones in a shared `Bytes`.

use bytes::Bytes;

/// Longest body stored inline.
pub(crate) const INLINE_MAX: usize = 22;

/// A job body.
#[derive(Clone)]
pub(crate) enum Body {
    /// A short body: its length and bytes.
    Inline(u8, [u8; INLINE_MAX]),
    /// A longer body (never a slice of a request buffer).
    Shared(Bytes),
}

impl Body {
    /// A body holding a copy of `b`.
    pub(crate) fn copy_from(b: &[u8]) -> Body {
        if b.len() <= INLINE_MAX {
            let mut data = [0u8; INLINE_MAX];
            data[..b.len()].copy_from_slice(b);
            Body::Inline(b.len() as u8, data)
        } else {
            Body::Shared(Bytes::copy_from_slice(b))
        }
    }

    /// A body from owned bytes (short ones are copied inline).
    pub(crate) fn from_bytes(b: Bytes) -> Body {
        if b.len() <= INLINE_MAX {
            Body::copy_from(&b)
        } else {
            Body::Shared(b)
        }
    }

    /// The body's bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Body::Inline(len, data) => &data[..usize::from(*len)],
            Body::Shared(b) => b,
        }
    }

    /// The body as `Bytes` (a copy for short bodies, shared otherwise).
    pub(crate) fn to_bytes(&self) -> Bytes {
        match self {
            Body::Inline(..) => Bytes::copy_from_slice(self.as_slice()),
            Body::Shared(b) => b.clone(),
        }
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.as_slice().len()
    }
}

impl std::ops::Deref for Body {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Body) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", Bytes::copy_from_slice(self.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_inline_long_shared_and_small() {
        assert!(std::mem::size_of::<Body>() <= 32);
        let s = Body::copy_from(b"hello");
        assert!(matches!(s, Body::Inline(5, _)));
        assert_eq!(&*s, b"hello");
        assert_eq!(s.to_bytes(), Bytes::from_static(b"hello"));
        let long = vec![7u8; 100];
        let l = Body::from_bytes(Bytes::from(long.clone()));
        assert!(matches!(l, Body::Shared(_)));
        assert_eq!(l.len(), 100);
        assert_eq!(Body::copy_from(&long), l);
    }
}
