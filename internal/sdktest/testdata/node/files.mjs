// Files through sandbox.fs. The Go test has written
// {work}/files/{a.txt,b.txt,sub/c.md,d.bin,e.txt,f.txt} (see sdk_test.go) and checks
// the disk after the steps that change it.
import { Readable } from 'node:stream';
import { b64 } from './lib.mjs';

export default function steps({ work }) {
  const dir = `${work}/files`;
  return [
    ['upload', async (s) => {
      await s.fs.uploadFile(Buffer.from('uploaded by the sdk\n'), `${dir}/up.txt`);
    }],
    ['download', async (s) => b64(await s.fs.downloadFile(`${dir}/a.txt`))],
    ['list', async (s) => (await s.fs.listFiles(dir)).map((f) => ({ name: f.name, isDir: f.isDir, size: f.size }))],
    ['details', async (s) => {
      const f = await s.fs.getFileDetails(`${dir}/a.txt`);
      return { name: f.name, isDir: f.isDir, size: f.size };
    }],
    ['find', async (s) => (await s.fs.findFiles(dir, 'needle')).map((m) => ({ file: m.file, line: m.line, content: m.content }))],
    ['search', async (s) => (await s.fs.searchFiles(dir, '*.md')).files],
    ['replace', async (s) => (await s.fs.replaceInFiles([`${dir}/a.txt`, `${dir}/b.txt`], 'needle', 'pin'))
      .map((r) => ({ file: r.file, success: r.success, error: r.error ?? '' }))],
    ['permissions', async (s) => {
      await s.fs.setFilePermissions(`${dir}/b.txt`, { mode: '600' });
      const f = await s.fs.getFileDetails(`${dir}/b.txt`);
      return { mode: f.mode, permissions: f.permissions };
    }],
    ['bulk-upload', async (s) => {
      await s.fs.uploadFiles([
        { source: Buffer.from('first\n'), destination: `${dir}/bulk/one.txt` },
        { source: Buffer.from([0, 1, 2, 255, 10, 13]), destination: `${dir}/bulk/two.bin` },
      ]);
    }],
    ['bulk-download', async (s) => (await s.fs.downloadFiles([
      { source: `${dir}/sub/c.md` },
      { source: `${dir}/d.bin` },
      { source: `${dir}/missing.txt` },
    ])).map((r) => ({
      source: r.source,
      result: r.result === undefined || typeof r.result === 'string' ? r.result ?? null : b64(r.result),
      error: r.error ?? null,
    }))],
    ['upload-stream', async (s) => {
      await s.fs.uploadFileStream(Readable.from([Buffer.from('streamed '), Buffer.from('upload\n')]), `${dir}/streamed.txt`);
    }],
    ['download-stream', async (s) => {
      const chunks = [];
      for await (const c of await s.fs.downloadFileStream(`${dir}/d.bin`)) {
        chunks.push(c);
      }
      return b64(Buffer.concat(chunks));
    }],
    ['create-folder', async (s) => {
      await s.fs.createFolder(`${dir}/made`, '750');
    }],
    ['move', async (s) => {
      await s.fs.moveFiles(`${dir}/e.txt`, `${dir}/e-moved.txt`);
    }],
    ['delete', async (s) => {
      await s.fs.deleteFile(`${dir}/f.txt`);
    }],
    // How the SDK's own multipart parser, which it uses where busboy
    // cannot run (browsers, serverless), reads a bulk-download answer.
    ['bulk-download-fallback', async (s, sdk, internal) => {
      const { extractBoundary, parseMultipart } = await internal('esm/utils/Multipart.js');
      const r = await s.fs.apiClient.downloadFiles({ paths: [`${dir}/sub/c.md`, `${dir}/missing.txt`] }, { responseType: 'arraybuffer' });
      return parseMultipart(new Uint8Array(r.data), extractBoundary(r.headers['content-type']))
        .map((p) => ({ name: p.name ?? null, filename: p.filename ?? null, data: b64(p.data) }));
    }],
  ];
}
