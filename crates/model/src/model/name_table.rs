//! A table of stable names: an enum whose every variant has one wire or
//! label name and a line saying what it means, written once in its row.
//! The verdict rules and actions (policy) and the health labels (metrics)
//! are such tables; dashboards and audit queries match on the names, so
//! rows are added, never renamed.

/// Writes the enum, `ALL`, `as_str` (the name), `what` (the meaning, also
/// the variant's doc), `Display` and `Serialize` as the name; in tests,
/// `parse` from the name.
#[macro_export]
macro_rules! name_table {
    ($(#[$meta:meta])* $ty:ident { $( $variant:ident => $name:literal, $what:literal; )* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $ty {
            $( #[doc = $what] $variant, )*
        }

        impl $ty {
            pub const ALL: &'static [$ty] = &[$( $ty::$variant, )*];

            pub const fn as_str(self) -> &'static str {
                match self { $( $ty::$variant => $name, )* }
            }

            pub const fn what(self) -> &'static str {
                match self { $( $ty::$variant => $what, )* }
            }

            #[cfg(test)]
            pub fn parse(s: &str) -> Option<$ty> {
                match s { $( $name => Some($ty::$variant), )* _ => None }
            }
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $ty {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}
