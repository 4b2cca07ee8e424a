// A dApp's view of a Ganglion devnet through a third-party Cardano library: Blaze
// (@blaze-cardano/sdk) with its stock Blockfrost provider, its base URL pointed at the devnet's
// HTTP API (`ganglion-devnet up --http`). Nothing of the library is replaced.
//
//   node client.mjs DEVNET_API KEY_HEX TO_BECH32 INDEXER_API JOB_ID
//
// 1. builds an ordinary payment of 5 ADA from KEY_HEX's enterprise address to TO_BECH32
//    (Blaze reads the protocol parameters and the wallet's UTxOs from the API, selects inputs,
//    balances, pays the fee), signs it and submits it (POST /tx/submit);
// 2. waits until the chain has it (GET /txs/{id}) and reads it back through the provider
//    (resolveUnspentOutputs: GET /txs/{id}/utxos; getUnspentOutputs: GET /addresses/…/utxos);
// 3. reads the settled Ganglion job JOB_ID from the indexer's read API (GET /jobs/{id}).
// Prints one JSON object; exits 1 with a message on any failure.
//
// The library is installed by setup.sh into GANGLION_NPM_CLIENT_DIR (a cache folder), so this
// file resolves it from there.
import { createRequire } from "node:module";

const dir = process.env.GANGLION_NPM_CLIENT_DIR;
if (!dir) throw new Error("GANGLION_NPM_CLIENT_DIR is not set (run setup.sh)");
const require = createRequire(`${dir}/package.json`);
const { Blaze, Blockfrost, HotSingleWallet, Core } = require("@blaze-cardano/sdk");

const [devnetApi, keyHex, toBech32, indexerApi, jobId] = process.argv.slice(2);
const LOVELACE = 5_000_000n;

async function getJson(url) {
  const r = await fetch(url);
  return { status: r.status, body: await r.json() };
}

async function main() {
  const provider = new Blockfrost({ network: "cardano-preview", projectId: "devnet" });
  // The provider's base URL is a public property; Blockfrost's ends in "/api/v0/".
  provider.url = devnetApi.endsWith("/") ? devnetApi : `${devnetApi}/`;
  const wallet = new HotSingleWallet(
    Core.Ed25519PrivateNormalKeyHex(keyHex),
    Core.NetworkId.Testnet,
    provider,
  );
  const blaze = await Blaze.from(provider, wallet);
  const from = (await wallet.getChangeAddress()).toBech32();
  const to = Core.Address.fromBech32(toBech32);

  const unsigned = await blaze.newTransaction().payLovelace(to, LOVELACE).complete();
  const signed = await blaze.signTransaction(unsigned);
  const txId = await blaze.submitTransaction(signed, true);

  // Confirmed: the chain answers for the transaction (blocks every slot with pending txs).
  let tx = null;
  for (let i = 0; i < 300 && !tx; i++) {
    const r = await getJson(`${provider.url}txs/${txId}`);
    if (r.status === 200) tx = r.body;
    else await new Promise((res) => setTimeout(res, 200));
  }
  if (!tx) throw new Error(`transaction ${txId} not on the chain after 60 s`);

  const [paid] = await provider.resolveUnspentOutputs([new Core.TransactionInput(txId, 0n)]);
  const atTo = await provider.getUnspentOutputs(to);
  const found = atTo.find(
    (u) => u.input().transactionId() === txId && u.input().index() === 0n,
  );

  const job = await getJson(`${indexerApi}/jobs/${jobId}`);
  return {
    tx_id: txId,
    from,
    fee: signed.body().fee().toString(),
    block_height: tx.block_height,
    paid_to: paid.output().address().toBech32(),
    paid_lovelace: paid.output().amount().coin().toString(),
    listed_at_address: Boolean(found),
    job_status: job.status,
    job: job.body,
  };
}

main().then(
  (out) => console.log(JSON.stringify(out)),
  (e) => {
    console.error(e && e.stack ? e.stack : String(e));
    process.exit(1);
  },
);
