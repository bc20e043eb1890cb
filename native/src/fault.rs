//! What went wrong in a walk: damage at a byte position (the Python side's `CorruptRecordError`),
//! or a read past the end of the data (the Python walk's `IndexError`, placed by its caller).

pub enum Fault {
    At(usize, String),
    PastData,
}

impl Fault {
    pub fn at(position: usize, reason: String) -> Fault {
        Fault::At(position, reason)
    }
}
