// SPDX-License-Identifier: GPL-2.0

//! Records an action emits into the principal buffer, and how they are read back.

use super::*;

/// Kind of an emitted record.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// `trace(expr)`: data holds the items.
    Trace = 1,
    /// `printf(fmt, ...)`: `id` is the format, data holds the arguments.
    Printf = 2,
    /// `exit(n)`: data holds one integer item.
    Exit = 3,
    /// `printa`: `id` is the aggregation, data holds one item, the format id or `u32::MAX`.
    Printa = 4,
    /// `clear(@a)`: `id` is the aggregation, no data.
    Clear = 5,
    /// `trunc(@a, n)`: `id` is the aggregation, data holds `n`.
    Trunc = 6,
    /// `normalize(@a, n)`: `id` is the aggregation, data holds `n`.
    Normalize = 7,
    /// `denormalize(@a)`: `id` is the aggregation, no data.
    Denormalize = 8,
    /// `system(fmt, ...)`: `id` is the format, data holds the arguments; the consumer runs
    /// the formatted command.
    System = 9,
}

impl RecordKind {
    /// Decode a record kind.
    pub fn from_u32(v: u32) -> Option<RecordKind> {
        use RecordKind::*;
        Some(match v {
            1 => Trace,
            2 => Printf,
            3 => Exit,
            4 => Printa,
            5 => Clear,
            6 => Trunc,
            7 => Normalize,
            8 => Denormalize,
            9 => System,
            _ => return None,
        })
    }
}

/// Item tag of a string in record data; integer tags are their [`IntType`] code (0..7).
pub const ITEM_STR: u8 = 0x10;

/// Item tag of raw memory in record data (`tracemem()`, `print()`): the bytes as read,
/// NULs included (ABI minor 14).
pub const ITEM_MEM: u8 = 0x11;

/// A record for the principal buffer, as the interpreter hands it to [`Env::emit`].
///
/// `data` is a sequence of items: an integer is its [`IntType`] byte then 8 bytes LE; a
/// string is [`ITEM_STR`], a 2-byte LE length and the bytes; raw memory is [`ITEM_MEM`],
/// a 2-byte LE length and the bytes. [`Items`] decodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// What produced the record.
    pub kind: RecordKind,
    /// Format or aggregation id (0 when unused).
    pub id: u32,
    /// The encoded items.
    pub data: &'a [u8],
}

/// One decoded record item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// An integer with its type.
    Int(u64, IntType),
    /// A string.
    Str(&'a [u8]),
    /// Raw memory (`tracemem()`, `print()`).
    Mem(&'a [u8]),
}

/// Iterator over the items of record data; stops (and sets `bad`) at malformed data.
#[derive(Clone, Debug)]
pub struct Items<'a> {
    data: &'a [u8],
    /// Set when malformed data was met.
    pub bad: bool,
}

impl<'a> Items<'a> {
    /// Iterate over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Items { data, bad: false }
    }
}

impl<'a> Iterator for Items<'a> {
    type Item = Item<'a>;

    fn next(&mut self) -> Option<Item<'a>> {
        let (&tag, rest) = self.data.split_first()?;
        if tag == ITEM_STR || tag == ITEM_MEM {
            if rest.len() >= 2 {
                let n = u16::from_le_bytes([rest[0], rest[1]]) as usize;
                if let Some(s) = rest.get(2..2 + n) {
                    self.data = &rest[2 + n..];
                    return Some(if tag == ITEM_STR {
                        Item::Str(s)
                    } else {
                        Item::Mem(s)
                    });
                }
            }
        } else if tag < 8 {
            if let Some(b) = rest.get(..8) {
                let mut w = [0u8; 8];
                w.copy_from_slice(b);
                self.data = &rest[8..];
                return Some(Item::Int(u64::from_le_bytes(w), IntType(tag)));
            }
        }
        self.bad = true;
        self.data = &[];
        None
    }
}
