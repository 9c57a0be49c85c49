"""This example demonstrates bcl.balance on a stream of tokenized texts: a short fine-tuning loop
whose batches are balanced as the records stream in, in one process and under DDP (two ranks,
gloo, CPU), with a resume mid-epoch that is checked to give the same batches (and the same losses)
as the uninterrupted run.
Requires: torch (Debian's python3-torch), bcl installed (docs/python.md), and the license texts
in /usr/share/common-licenses (present on every Debian system).

Every paragraph of every license text is a record, tokenized by a byte-level tokenizer (its
UTF-8 bytes are its tokens, at most --max-tokens). A generator yields this rank's share: a stream
with no dataset index, as a reader of shards would. bcl.balance estimates each record's cost as
a + b*L + c*L^2 of its token count L and yields batches of B records, which the loop pads to the
batch's longest (so batching="padded": a batch costs B times its longest record). The model is a
one-layer causal transformer over bytes.

    build-python/venv/bin/python examples/python/stream_finetune.py           # 1, then 2 ranks
    build-python/venv/bin/python examples/python/stream_finetune.py --smoke   # a few seconds
"""

import argparse
import io
import os
import pathlib
import sys
import tempfile

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread per rank: two ranks share two cores

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402

import bcl  # noqa: E402

CORPUS = pathlib.Path("/usr/share/common-licenses")


def paragraphs(max_tokens):
    """Every paragraph of every license text (links to another text skipped), its whitespace
    folded, as bytes: the tokens of a byte-level tokenizer."""
    texts = []
    for path in sorted(CORPUS.iterdir()):
        if path.is_file() and not path.is_symlink():
            for paragraph in path.read_text(errors="replace").split("\n\n"):
                tokens = " ".join(paragraph.split()).encode()[:max_tokens]
                if len(tokens) >= 8:
                    texts.append(tokens)
    return texts


def tokenized_texts(texts, rank, world, count, start=0):
    """This rank's share of the records (every world-th paragraph), `count` of them, from the
    `start`-th on: the stream a resumed run continues."""
    share = texts[rank::world][:count]
    for i in range(start, count):
        yield {"id": rank + i * world, "tokens": share[i], "length": len(share[i])}


class TinyLM(nn.Module):
    """One causal transformer layer over byte embeddings."""

    def __init__(self, max_tokens, d=64):
        super().__init__()
        self.embed, self.position = nn.Embedding(256, d), nn.Embedding(max_tokens, d)
        self.layer = nn.TransformerEncoderLayer(d, 2, 4 * d, dropout=0.0, batch_first=True)
        self.out = nn.Linear(d, 256)

    def forward(self, tokens, padding):
        n = tokens.shape[1]
        causal = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        x = self.embed(tokens) + self.position(torch.arange(n))
        return self.out(self.layer(x, src_mask=causal, src_key_padding_mask=padding))


def train_step(model, optimizer, batch):
    """Pads the batch to its longest record and takes one step on next-byte prediction."""
    longest = max(r["length"] for r in batch)
    tokens = torch.zeros(len(batch), longest, dtype=torch.long)
    for row, record in enumerate(batch):
        tokens[row, : record["length"]] = torch.tensor(list(record["tokens"]))
    padding = torch.arange(longest)[None, :] >= torch.tensor([r["length"] for r in batch])[:, None]
    targets = tokens[:, 1:].masked_fill(padding[:, 1:], -100)
    logits = model(tokens, padding)[:, :-1]
    loss = nn.functional.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward()  # under DDP, the gradients are averaged over the ranks here
    optimizer.step()
    return loss.item()


def run(rank, world, args):
    """One rank's epoch, then the same epoch resumed from a checkpoint taken mid-way; True if
    the resumed run gave the uninterrupted run's batches and losses."""
    torch.set_num_threads(1)
    texts = paragraphs(args.max_tokens)
    # Every rank takes the same number of records (DDP needs the same number of steps): the
    # promise length= checks. The texts end up the same on every rank: they are all read.
    count = min(len(texts) // world, args.records or len(texts))
    cost = bcl.affine_quadratic("length", 0.0, 1.0, 1.0 / 128)  # attention shows at these lengths
    options = dict(batch_size=args.batch_size, batching="padded", length=count)

    def model_and_optimizer():
        torch.manual_seed(0)
        model = TinyLM(args.max_tokens)
        trained = nn.parallel.DistributedDataParallel(model) if world > 1 else model
        return model, trained, torch.optim.Adam(model.parameters(), lr=3e-3)

    # The uninterrupted epoch, saving a checkpoint after half of its batches.
    model, trained, optimizer = model_and_optimizer()
    stream = bcl.balance(tokenized_texts(texts, rank, world, count), cost, **options)
    half = -(-count // args.batch_size) // 2
    batches, losses, checkpoint = [], [], io.BytesIO()
    for step, batch in enumerate(stream, start=1):
        losses.append(train_step(trained, optimizer, batch))
        batches.append([r["id"] for r in batch])
        if step == half:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "stream": stream.state_dict()}, checkpoint)  # fmt: skip

    # A new process would do this: a new model, optimizer and stream, the generator started
    # where the saved stream had taken its records up to (upstream_consumed).
    checkpoint.seek(0)
    saved = torch.load(checkpoint)
    model, trained, optimizer = model_and_optimizer()
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    start = saved["stream"]["upstream_consumed"]
    resumed = bcl.balance(tokenized_texts(texts, rank, world, count, start), cost, **options)
    resumed.load_state_dict(saved["stream"])
    rest = [(train_step(trained, optimizer, b), [r["id"] for r in b]) for b in resumed]

    same_batches = [ids for _, ids in rest] == batches[half:]
    same_losses = [loss for loss, _ in rest] == losses[half:]
    print(
        f"rank {rank} of {world}: {count} records in {len(batches)} batches, loss "
        f"{losses[0]:.2f} -> {losses[-1]:.2f}; resumed after batch {half}: same batches "
        f"{same_batches}, same losses {same_losses}",
        flush=True,
    )
    # What a step costs is the slowest rank's padded batch: B times its longest record. Plain
    # batches are each rank's records B at a time in arrival order.
    length = {i: len(t) for i, t in enumerate(texts)}
    steps = [[len(b) * max(length[i] for i in b) for b in batches]]
    if world > 1:  # every rank ran the same number of steps (or DDP would have hung)
        steps = [None] * world
        dist.all_gather_object(steps, [len(b) * max(length[i] for i in b) for b in batches])
        assert len({len(s) for s in steps}) == 1, [len(s) for s in steps]
    b = args.batch_size
    plain = [[len(t[k : k + b]) * max(map(len, t[k : k + b])) for k in range(0, count, b)]
             for t in (texts[r::world][:count] for r in range(world))]  # fmt: skip
    if rank == 0:
        slowest = [int(np.max(s, axis=0).sum()) for s in (plain, steps)]
        print(
            f"{world} rank(s): padded tokens of the slowest rank, summed over the epoch's "
            f"{len(batches)} steps: plain batches {slowest[0]}, bcl {slowest[1]} "
            f"({slowest[1] / slowest[0] - 1:+.0%})",
            flush=True,
        )
    return same_batches and same_losses


def rank_main(rank, world, args, rendezvous):
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank,
                            world_size=world)  # fmt: skip
    ok = run(rank, world, args)
    dist.destroy_process_group()
    if not ok:
        sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=512, help="tokens kept per paragraph")
    parser.add_argument("--records", type=int, default=0, help="records per rank (0: all)")
    parser.add_argument("--smoke", action="store_true", help="96 records per rank, 256 tokens")
    args = parser.parse_args()
    if args.smoke:
        args.records, args.max_tokens = 96, 256
    ok = run(0, 1, args)
    with tempfile.TemporaryDirectory() as folder:  # where the two ranks find each other
        rendezvous = os.path.join(folder, "rendezvous")
        mp.spawn(rank_main, args=(2, args, rendezvous), nprocs=2, join=True)  # raises on failure
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
