; ModuleID = 'LLVMDialectModule'
source_filename = "LLVMDialectModule"
target datalayout = "e-p3:32:32-p4:32:32-p5:32:32-p6:32:32-p7:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"

; Function Attrs: nounwind
define ptx_kernel void @add_kernel(ptr addrspace(1) %0, ptr addrspace(1) %1, ptr addrspace(1) %2, ptr addrspace(1) readnone captures(none) %3, ptr addrspace(1) readnone captures(none) %4) local_unnamed_addr #0 !dbg !3 {
  %6 = tail call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x(), !dbg !6
  %7 = shl i32 %6, 10, !dbg !7
  %8 = tail call i32 @llvm.nvvm.read.ptx.sreg.tid.x(), !dbg !8
  %9 = shl nuw nsw i32 %8, 2, !dbg !8
  %10 = and i32 %9, 508, !dbg !8
  %11 = or disjoint i32 %10, %7, !dbg !9
  %12 = or disjoint i32 %11, 512, !dbg !9
  %13 = sext i32 %11 to i64, !dbg !10
  %14 = getelementptr float, ptr addrspace(1) %0, i64 %13, !dbg !10
  %15 = sext i32 %12 to i64, !dbg !10
  %16 = getelementptr float, ptr addrspace(1) %0, i64 %15, !dbg !10
  %17 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %14) #2, !dbg !11
  %18 = extractvalue { i32, i32, i32, i32 } %17, 0, !dbg !11
  %19 = extractvalue { i32, i32, i32, i32 } %17, 1, !dbg !11
  %20 = extractvalue { i32, i32, i32, i32 } %17, 2, !dbg !11
  %21 = extractvalue { i32, i32, i32, i32 } %17, 3, !dbg !11
  %22 = bitcast i32 %18 to float, !dbg !11
  %23 = bitcast i32 %19 to float, !dbg !11
  %24 = bitcast i32 %20 to float, !dbg !11
  %25 = bitcast i32 %21 to float, !dbg !11
  %26 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %16) #2, !dbg !11
  %27 = extractvalue { i32, i32, i32, i32 } %26, 0, !dbg !11
  %28 = extractvalue { i32, i32, i32, i32 } %26, 1, !dbg !11
  %29 = extractvalue { i32, i32, i32, i32 } %26, 2, !dbg !11
  %30 = extractvalue { i32, i32, i32, i32 } %26, 3, !dbg !11
  %31 = bitcast i32 %27 to float, !dbg !11
  %32 = bitcast i32 %28 to float, !dbg !11
  %33 = bitcast i32 %29 to float, !dbg !11
  %34 = bitcast i32 %30 to float, !dbg !11
  %35 = getelementptr float, ptr addrspace(1) %1, i64 %13, !dbg !12
  %36 = getelementptr float, ptr addrspace(1) %1, i64 %15, !dbg !12
  %37 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %35) #2, !dbg !13
  %38 = extractvalue { i32, i32, i32, i32 } %37, 0, !dbg !13
  %39 = extractvalue { i32, i32, i32, i32 } %37, 1, !dbg !13
  %40 = extractvalue { i32, i32, i32, i32 } %37, 2, !dbg !13
  %41 = extractvalue { i32, i32, i32, i32 } %37, 3, !dbg !13
  %42 = bitcast i32 %38 to float, !dbg !13
  %43 = bitcast i32 %39 to float, !dbg !13
  %44 = bitcast i32 %40 to float, !dbg !13
  %45 = bitcast i32 %41 to float, !dbg !13
  %46 = tail call { i32, i32, i32, i32 } asm sideeffect "mov.u32 $0, 0x0;\0A\09mov.u32 $1, 0x0;\0A\09mov.u32 $2, 0x0;\0A\09mov.u32 $3, 0x0;\0A\09ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l"(ptr addrspace(1) %36) #2, !dbg !13
  %47 = extractvalue { i32, i32, i32, i32 } %46, 0, !dbg !13
  %48 = extractvalue { i32, i32, i32, i32 } %46, 1, !dbg !13
  %49 = extractvalue { i32, i32, i32, i32 } %46, 2, !dbg !13
  %50 = extractvalue { i32, i32, i32, i32 } %46, 3, !dbg !13
  %51 = bitcast i32 %47 to float, !dbg !13
  %52 = bitcast i32 %48 to float, !dbg !13
  %53 = bitcast i32 %49 to float, !dbg !13
  %54 = bitcast i32 %50 to float, !dbg !13
  %55 = fadd float %22, %42, !dbg !14
  %56 = fadd float %23, %43, !dbg !14
  %57 = fadd float %24, %44, !dbg !14
  %58 = fadd float %25, %45, !dbg !14
  %59 = fadd float %31, %51, !dbg !14
  %60 = fadd float %32, %52, !dbg !14
  %61 = fadd float %33, %53, !dbg !14
  %62 = fadd float %34, %54, !dbg !14
  %63 = getelementptr float, ptr addrspace(1) %2, i64 %13, !dbg !15
  %64 = getelementptr float, ptr addrspace(1) %2, i64 %15, !dbg !15
  %65 = bitcast float %55 to i32, !dbg !16
  %66 = bitcast float %56 to i32, !dbg !16
  %67 = bitcast float %57 to i32, !dbg !16
  %68 = bitcast float %58 to i32, !dbg !16
  tail call void asm sideeffect "st.global.v4.b32 [ $4 + 0 ], { $0, $1, $2, $3 };", "r,r,r,r,l"(i32 %65, i32 %66, i32 %67, i32 %68, ptr addrspace(1) %63) #2, !dbg !16
  %69 = bitcast float %59 to i32, !dbg !16
  %70 = bitcast float %60 to i32, !dbg !16
  %71 = bitcast float %61 to i32, !dbg !16
  %72 = bitcast float %62 to i32, !dbg !16
  tail call void asm sideeffect "st.global.v4.b32 [ $4 + 0 ], { $0, $1, $2, $3 };", "r,r,r,r,l"(i32 %69, i32 %70, i32 %71, i32 %72, ptr addrspace(1) %64) #2, !dbg !16
  ret void, !dbg !17
}

; Function Attrs: mustprogress nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare noundef range(i32 0, 2147483647) i32 @llvm.nvvm.read.ptx.sreg.ctaid.x() #1

; Function Attrs: mustprogress nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare noundef range(i32 0, 1024) i32 @llvm.nvvm.read.ptx.sreg.tid.x() #1

attributes #0 = { nounwind "nvvm.reqntid"="128" }
attributes #1 = { mustprogress nocallback nofree nosync nounwind speculatable willreturn memory(none) }
attributes #2 = { nounwind }

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2}

!0 = distinct !DICompileUnit(language: DW_LANG_C, file: !1, producer: "triton", isOptimized: true, runtimeVersion: 0, emissionKind: LineTablesOnly)
!1 = !DIFile(filename: "add_kernel_841643daad36bf86.py", directory: "/tmp/pallas-prof-cache/kernels")
!2 = !{i32 2, !"Debug Info Version", i32 3}
!3 = distinct !DISubprogram(name: "add_kernel", linkageName: "add_kernel", scope: !1, file: !1, line: 11, type: !4, scopeLine: 11, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0)
!4 = !DISubroutineType(cc: DW_CC_normal, types: !5)
!5 = !{}
!6 = !DILocation(line: 12, column: 25, scope: !3)
!7 = !DILocation(line: 13, column: 26, scope: !3)
!8 = !DILocation(line: 16, column: 44, scope: !3)
!9 = !DILocation(line: 16, column: 31, scope: !3)
!10 = !DILocation(line: 17, column: 24, scope: !3)
!11 = !DILocation(line: 17, column: 16, scope: !3)
!12 = !DILocation(line: 19, column: 24, scope: !3)
!13 = !DILocation(line: 19, column: 16, scope: !3)
!14 = !DILocation(line: 20, column: 14, scope: !3)
!15 = !DILocation(line: 22, column: 21, scope: !3)
!16 = !DILocation(line: 22, column: 32, scope: !3)
!17 = !DILocation(line: 22, column: 4, scope: !3)
