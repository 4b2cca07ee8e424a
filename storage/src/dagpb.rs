//! Just enough dag-pb and UnixFS decoding to walk a DAG and read a file back: the links of a
//! `PBNode` and the `Type`/`Data` fields of its UnixFS payload.
//!
//! Wire format from the dag-pb spec (`ipld/specs` `block-layer/codecs/dag-pb.md`): `PBNode {
//! Links = 2 (repeated PBLink), Data = 1 (bytes) }`, `PBLink { Hash = 1, Name = 2, Tsize = 3 }`;
//! UnixFS from `ipfs/specs` `UNIXFS.md`: `Data { Type = 1, Data = 2, filesize = 3, blocksizes = 4 … }`.

use cid::Cid;

/// A dag-pb block that does not parse.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DagPbError {
    /// The protobuf framing is broken (truncated varint or length, unknown wire type).
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
    /// A link's `Hash` is not a CID.
    #[error("link {index} holds an invalid CID")]
    InvalidLinkCid {
        /// Position of the link in the node.
        index: usize,
        /// The CID parser's complaint.
        #[source]
        source: cid::Error,
    },
}

/// One `PBLink`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Target block.
    pub cid: Cid,
    /// Entry name (directories) or empty (file chunks).
    pub name: String,
    /// `Tsize`: cumulative bytes of the target's subtree, as Kubo computes it.
    pub tsize: u64,
}

/// UnixFS node type (`Data.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnixFsType {
    /// 0
    Raw,
    /// 1
    Directory,
    /// 2
    File,
    /// 3
    Metadata,
    /// 4
    Symlink,
    /// 5
    HamtShard,
    /// Anything else.
    Unknown(u64),
}

/// A decoded dag-pb node: its links and UnixFS payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The `Links`, in order.
    pub links: Vec<Link>,
    /// UnixFS `Type`, when the node carries UnixFS data.
    pub unixfs_type: Option<UnixFsType>,
    /// UnixFS `Data`: the file bytes held in this node itself (empty for most parents).
    pub data: Vec<u8>,
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.buf.is_empty()
    }

    fn varint(&mut self) -> Result<u64, DagPbError> {
        let mut value = 0u64;
        for (i, byte) in self.buf.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.buf = &self.buf[i + 1..];
                return Ok(value);
            }
        }
        Err(DagPbError::Malformed("truncated or overlong varint"))
    }

    fn bytes(&mut self) -> Result<&'a [u8], DagPbError> {
        let len = usize::try_from(self.varint()?)
            .map_err(|_| DagPbError::Malformed("length overflow"))?;
        if len > self.buf.len() {
            return Err(DagPbError::Malformed("length past end of block"));
        }
        let (head, tail) = self.buf.split_at(len);
        self.buf = tail;
        Ok(head)
    }

    /// Reads a field key, returning `(field number, wire type)`.
    fn key(&mut self) -> Result<(u64, u8), DagPbError> {
        let key = self.varint()?;
        Ok((key >> 3, (key & 7) as u8))
    }

    fn skip(&mut self, wire: u8) -> Result<(), DagPbError> {
        let n = match wire {
            0 => return self.varint().map(drop),
            1 => 8,
            2 => return self.bytes().map(drop),
            5 => 4,
            _ => return Err(DagPbError::Malformed("unknown wire type")),
        };
        if n > self.buf.len() {
            return Err(DagPbError::Malformed("fixed field past end of block"));
        }
        self.buf = &self.buf[n..];
        Ok(())
    }
}

/// Decodes a dag-pb block.
///
/// # Errors
/// [`DagPbError`] when the bytes are not dag-pb.
pub fn decode(block: &[u8]) -> Result<Node, DagPbError> {
    let mut r = Reader { buf: block };
    let mut links = Vec::new();
    let mut payload: Option<&[u8]> = None;
    while !r.done() {
        match r.key()? {
            (2, 2) => links.push(decode_link(r.bytes()?, links.len())?),
            (1, 2) => payload = Some(r.bytes()?),
            (_, wire) => r.skip(wire)?,
        }
    }
    let (unixfs_type, data) = match payload {
        Some(p) => decode_unixfs(p)?,
        None => (None, Vec::new()),
    };
    Ok(Node {
        links,
        unixfs_type,
        data,
    })
}

fn decode_link(buf: &[u8], index: usize) -> Result<Link, DagPbError> {
    let mut r = Reader { buf };
    let mut hash: Option<&[u8]> = None;
    let mut name = String::new();
    let mut tsize = 0;
    while !r.done() {
        match r.key()? {
            (1, 2) => hash = Some(r.bytes()?),
            (2, 2) => name = String::from_utf8_lossy(r.bytes()?).into_owned(),
            (3, 0) => tsize = r.varint()?,
            (_, wire) => r.skip(wire)?,
        }
    }
    let hash = hash.ok_or(DagPbError::Malformed("link without Hash"))?;
    let cid = Cid::try_from(hash).map_err(|source| DagPbError::InvalidLinkCid { index, source })?;
    Ok(Link { cid, name, tsize })
}

fn decode_unixfs(buf: &[u8]) -> Result<(Option<UnixFsType>, Vec<u8>), DagPbError> {
    let mut r = Reader { buf };
    let mut ty = None;
    let mut data = Vec::new();
    while !r.done() {
        match r.key()? {
            (1, 0) => {
                ty = Some(match r.varint()? {
                    0 => UnixFsType::Raw,
                    1 => UnixFsType::Directory,
                    2 => UnixFsType::File,
                    3 => UnixFsType::Metadata,
                    4 => UnixFsType::Symlink,
                    5 => UnixFsType::HamtShard,
                    other => UnixFsType::Unknown(other),
                })
            }
            (2, 2) => data = r.bytes()?.to_vec(),
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok((ty, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_kubo_leaf_node() {
        // `ipfs add` of "hello world\n" (QmT78z…): PBNode{Data: UnixFS{Type: File, Data, filesize}}.
        let mut block = vec![0x0a, 0x12, 0x08, 0x02, 0x12, 0x0c];
        block.extend_from_slice(b"hello world\n");
        block.extend_from_slice(&[0x18, 0x0c]);
        let node = decode(&block).expect("decode");
        assert!(node.links.is_empty());
        assert_eq!(node.unixfs_type, Some(UnixFsType::File));
        assert_eq!(node.data, b"hello world\n");
        assert_eq!(
            crate::block::cid_v1(crate::block::DAG_PB, &block).to_string(),
            "bafybeicg2rebjoofv4kbyovkw7af3rpiitvnl6i7ckcywaq6xjcxnc2mby",
        );
    }

    #[test]
    fn truncated_node_is_an_error_not_a_panic() {
        assert!(decode(&[0x0a, 0x12, 0x08]).is_err());
        assert!(decode(&[0x12, 0xff]).is_err());
        assert!(decode(&[0x0f]).is_err());
    }
}
