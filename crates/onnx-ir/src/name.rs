//! Interned names: [`Name`] is a cheap-to-clone, cheap-to-compare string used for value names,
//! op types, domains and attribute names; [`Interner`] makes equal names share one allocation
//! while a model is converted.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// An immutable shared string. Clone is a reference-count bump; equality first compares the
/// pointers (names interned by one [`Interner`] share their allocation), then the text.
#[derive(Clone, Eq)]
pub struct Name(Arc<str>);

impl Name {
    /// A new, non-interned name.
    pub fn new(text: &str) -> Self {
        Name(Arc::from(text))
    }

    /// The text of the name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True when both names share one allocation (they came from the same interner).
    pub fn ptr_eq(&self, other: &Name) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || *self.0 == *other.0
    }
}

impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (*self.0).hash(state)
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Self) -> Ordering {
        (*self.0).cmp(&*other.0)
    }
}

impl Default for Name {
    fn default() -> Self {
        Name::new("")
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Self {
        Name::new(text)
    }
}

impl From<String> for Name {
    fn from(text: String) -> Self {
        Name(Arc::from(text))
    }
}

impl From<&String> for Name {
    fn from(text: &String) -> Self {
        Name::new(text)
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

/// Hands out one shared [`Name`] per distinct text. Used once per model conversion; lookups
/// only, so hash order never shows in any output.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    names: HashSet<Name>,
}

impl Interner {
    /// An empty interner.
    pub fn new() -> Self {
        Self::default()
    }

    /// The shared name for `text`, allocating it on first use.
    pub fn intern(&mut self, text: &str) -> Name {
        if let Some(name) = self.names.get(text) {
            return name.clone();
        }
        let name = Name::new(text);
        self.names.insert(name.clone());
        name
    }

    /// Number of distinct names seen.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when no name was interned yet.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interned_names_share_one_allocation() {
        let mut interner = Interner::new();
        let a = interner.intern("conv1");
        let b = interner.intern(&String::from("conv1"));
        assert!(a.ptr_eq(&b));
        assert_eq!(interner.len(), 1);
        assert_eq!(a, Name::new("conv1"));
        assert!(!a.ptr_eq(&Name::new("conv1")));
    }

    #[test]
    fn names_order_and_display_as_text() {
        let mut names = [Name::new("b"), Name::new("a"), Name::new("c")];
        names.sort();
        let texts: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        assert_eq!(texts, ["a", "b", "c"]);
        assert_eq!(format!("{:?}", Name::new("x")), "\"x\"");
        assert_eq!(&*Name::new("abc"), "abc");
    }
}
