//! The storage subcommands end to end on a sled store, checked against the vectors.

use std::sync::Arc;

use ganglion_storage::blockstore::SledBlockstore;
use ganglion_storage::cli::{self, Command, Outcome};
use ganglion_storage::pin::Embedded;
use ganglion_storage::unixfs::ImportOptions;

#[tokio::test]
async fn add_piece_cid_cat_pin_gc() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pinner = Embedded::new(Arc::new(
        SledBlockstore::open(dir.path().join("db")).expect("open"),
    ));
    let input = dir.path().join("hello-world.txt");
    std::fs::write(&input, b"hello world\n").expect("write");

    let added = cli::execute(
        &pinner,
        Command::Add {
            path: input.clone(),
            options: ImportOptions::kubo_default(),
        },
    )
    .await
    .expect("add");
    let Outcome::Added {
        cid,
        cumulative_size,
        ..
    } = added
    else {
        panic!("{added:?}")
    };
    assert_eq!(cid, "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o");
    assert_eq!(cumulative_size, 20);

    // piece-cid of the DAG = commp-vectors.json project-ipfs-fixtures, hello-world kubo_default.
    let car = dir.path().join("hello.car");
    let piece = cli::execute(
        &pinner,
        Command::PieceCidOfDag {
            cid: cid.clone(),
            car_out: car.clone(),
        },
    )
    .await
    .expect("piece-cid");
    let want = Outcome::Piece {
        piece_cid: "baga6ea4seaqfkprf35jf3jfgy3ws37rngbzkpmbi74k35545omhzzgn2od2n2jq".into(),
        padded_piece_bytes: 128,
        payload_bytes: 112,
        payload_cid: Some(cid.clone()),
    };
    assert_eq!(piece, want);
    // piece-cid of the written CAR file agrees.
    let of_file = cli::execute(&pinner, Command::PieceCidOfFile { path: car })
        .await
        .expect("piece-cid file");
    assert!(
        matches!(&of_file, Outcome::Piece { piece_cid, payload_cid: None, .. }
            if piece_cid.starts_with("baga6ea4seaqfkprf35jf3jfgy3")),
        "{of_file:?}"
    );

    let out = dir.path().join("out.txt");
    let wrote = cli::execute(
        &pinner,
        Command::Cat {
            cid: cid.clone(),
            out: out.clone(),
        },
    )
    .await
    .expect("cat");
    assert_eq!(wrote, Outcome::Wrote { bytes: 12 });
    assert_eq!(std::fs::read(&out).expect("read"), b"hello world\n");

    let bad = cli::execute(
        &pinner,
        Command::Pin {
            cid: "not-a-cid".into(),
        },
    )
    .await;
    assert!(matches!(bad, Err(cli::Error::InvalidCid(_))), "{bad:?}");

    cli::execute(&pinner, Command::Unpin { cid: cid.clone() })
        .await
        .expect("unpin");
    let gc = cli::execute(&pinner, Command::Gc).await.expect("gc");
    assert_eq!(
        gc,
        Outcome::Collected {
            removed_blocks: 1,
            freed_bytes: 20
        }
    );
    let pins = cli::execute(&pinner, Command::Pins).await.expect("pins");
    assert_eq!(pins, Outcome::Pins { cids: vec![] });
    assert_eq!(
        serde_json::to_value(&pins).expect("json"),
        serde_json::json!({"result": "pins", "cids": []})
    );
}
